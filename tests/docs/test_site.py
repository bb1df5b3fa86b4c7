"""The documentation site builds strictly, and covers the code: every setting, every route."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.api.openapi import document_of
from app.settings.config import Config
from app.settings.model_entries import ModelEntrySchema
from app.settings.startup import describe_settings
from tests.docs.conftest import build

ROOT = Path(__file__).resolve().parents[2]
HAND_WRITTEN_REFERENCE = sorted(p for p in (ROOT / "docs" / "api").glob("*.md") if p.name != "openapi.md")


def test_every_setting_is_on_the_configuration_page(site: Path) -> None:
    page = (site / "configuration" / "index.html").read_text()
    settings = describe_settings()
    assert len(settings) > 40
    for env, _, meaning in settings:
        assert f"<code>{env}</code>" in page, env
        assert _words(meaning)[:6] in _words(page), env  # its meaning beside it, as the code says it
    for name, field in ModelEntrySchema().fields.items():
        assert f"<code>{field.data_key or name}</code>" in page, name


def test_every_route_of_the_openapi_document_is_in_the_api_reference(site: Path) -> None:
    document = document_of(Config.from_env({}))
    page = (site / "api" / "openapi" / "index.html").read_text()
    # Each operation is a heading: its method, then its path (parameters highlighted in spans).
    rendered = {
        re.sub(r"<[^>]+>", "", h) for h in re.findall(r'<h3 id="[^"]*">(.*?)<a class="headerlink"', page)
    }
    written = " ".join(_plain_routes(page.read_text()) for page in HAND_WRITTEN_REFERENCE)
    served = (site / "api" / "openapi.json").read_text()
    assert len(document["paths"]) > 50
    for path, operations in document["paths"].items():
        assert f'"{path}"' in served, path
        for method in operations:
            # The rendered document: each operation under its method and path.
            assert f"{method.upper()} {path}" in rendered, (method, path)
        # The family pages: each route named in words, not only in the rendered document.
        assert _plain_routes(path) in written, f"no page of docs/api/ names {path}"


def test_a_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    """The site's own validation settings, on a page that links to a page that is not there."""
    validation = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["validation"]
    assert validation["unrecognized_links"] == validation["anchors"] == "warn"  # --strict fails on them
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the missing page](missing.md).\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(yaml.safe_dump({"site_name": "check", "docs_dir": str(docs), "validation": validation}))
    built = build(config, tmp_path / "site")
    assert built.returncode != 0 and "missing.md" in built.stderr, built.stderr


def _hook(name: str) -> Any:
    """A hook of docs/hooks/, loaded as mkdocs loads it: by its path."""
    spec = importlib.util.spec_from_file_location(f"hook_{name}", ROOT / "docs" / "hooks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _words(text: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", text).split())


def _plain_routes(text: str) -> str:
    """Paths with their parameters' names blurred: `/v1/files/{file_id}` and `/v1/files/{id}` match."""
    return re.sub(r"\{[^}/]*\}", "{}", text)


@pytest.mark.parametrize(
    ("page", "says"),
    [
        ("# Models\n\nEvery error has its shape,\nwith the status (400 with `param`,\n", "ends mid-sentence"),
        ("# Models\n\nText.\n\n## What next\n", "ends with a heading"),
        ("# Keys\n\n### Keys\n\nText.\n", "a heading repeats its title"),
    ],
    ids=["cut mid-sentence", "a heading last", "the title twice"],
)
def test_a_visibly_broken_page_fails_the_strict_build(tmp_path: Path, page: str, says: str) -> None:
    """The site's own page checks (docs/hooks/page_checks.py), on a page broken as pages were."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(page)
    config = tmp_path / "mkdocs.yml"
    hook = str(ROOT / "docs" / "hooks" / "page_checks.py")
    config.write_text(yaml.safe_dump({"site_name": "check", "docs_dir": str(docs), "hooks": [hook]}))
    built = build(config, tmp_path / "site")
    assert built.returncode != 0 and says in built.stderr, built.stderr
    (docs / "index.md").write_text("# Models\n\nA whole sentence.\n\n```sh\nmake serve\n```\n")
    assert build(config, tmp_path / "site").returncode == 0  # a finished page, ending in code, builds


def test_every_error_class_is_on_the_errors_page(site: Path) -> None:
    page = _words((site / "api" / "errors" / "index.html").read_text())
    kinds = _hook("generated").error_classes()  # the hook's own walk of the error tree
    assert len(kinds) >= 15
    for kind in kinds:
        assert _words(kind.__doc__ or "")[:40] in page, kind.__name__


def test_the_drain_page_lists_every_route_as_the_drain_treats_it(site: Path) -> None:
    from app.api.access.draining import starts_work

    page = _words((site / "operations" / "drain-reload" / "index.html").read_text())
    refused, answered = page.split("Refused with a 503")[1].split("Answered as usual")
    document = document_of(Config.from_env({}))
    for path, operations in document["paths"].items():
        for method in operations:
            route = re.escape(f"{method.upper()} {path}") + r" ?[,.]"  # the whole route, not a prefix of one
            assert re.search(route, refused if starts_work(method.upper(), path) else answered), route
