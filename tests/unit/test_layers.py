"""The layers are enforced, not hoped for: import-linter fails a copy of the app that breaks one."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
_FAMILIES = "API families share only the shared rooms"


def _not_python(folder: str, names: list[str]) -> set[str]:
    """What a copy for import-linter leaves out: all but packages and modules (no node_modules, venvs)."""
    return {n for n in names if not (n.endswith(".py") or (Path(folder, n).is_dir() and n.isidentifier()))}


def lint_copy(tmp_path: Path, breaks: list[tuple[str, str]]) -> subprocess.CompletedProcess[str]:
    """Run lint-imports on a copy of the checked packages' Python files, with each (module, line) of
    `breaks` appended (module: a path under app/, or under the root for tests/, bench/ and harness/)."""
    for package in ("app", "harness", "tests", "bench"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=_not_python)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for module, line in breaks:
        target = (
            tmp_path / module
            if module.split("/")[0] in ("tests", "bench", "harness")
            else tmp_path / "app" / module
        )
        assert target.is_file(), f"{module} does not exist: the case would prove nothing"
        with target.open("a") as handle:
            handle.write(f"\n{line}  # noqa\n")
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )


def test_the_app_keeps_every_contract(tmp_path: Path) -> None:
    result = lint_copy(tmp_path, [])
    assert result.returncode == 0, result.stdout
    assert "0 broken" in result.stdout


# (module, line appended to it, the contract it breaks). All are written into one copy and checked
# by one run of lint-imports (a run takes seconds): each case must appear in its contract's report.
BREAKS = [
    ("engine/types.py", "import flask", "app.engine is not allowed to import flask"),
    (
        "engine/sampling/sampler.py",
        "from app.telemetry import metrics",
        "app.engine is not allowed to import",
    ),
    ("api/http/sse.py", "import llama_cpp", "app.api is not allowed to import llama_cpp"),
    ("serving/peers.py", "from app.api.http import errors", "Layers"),
    ("settings/config.py", "from app.engine import types", "Layers"),  # settings sit below all
    ("ui/__init__.py", "from app.api.http import errors", "Layers"),  # the pages only call the API
    # Families share only the shared rooms: neither another family, nor the registry above them.
    ("api/chat/routes.py", "from app.api.responses import routes", _FAMILIES),
    ("api/anthropic/presenter.py", "from app.api.chat import objects", _FAMILIES),
    ("api/http/sse.py", "from app.api.chat import objects", _FAMILIES),
    ("api/status/routes.py", "from app.api import families", _FAMILIES),
    # The shared rooms in order: HTTP plumbing under prompting, under the loop and the routing.
    ("api/http/body.py", "from app.api.routing import on_demand", _FAMILIES),
    ("api/prompting/tools.py", "from app.api.generation import planning", _FAMILIES),
    ("api/generation/loop.py", "from app.api.routing import route", _FAMILIES),
    # Tests and benchmarks share only harness/: neither imports the other, nor the app them.
    (
        "tests/integration/engine/test_lora.py",
        "from bench import run",
        "Tests and benchmarks share only the harness",
    ),
    ("bench/run.py", "from tests.support import sse", "Benchmarks never import the tests"),
    ("harness/servers.py", "from tests.support import sse", "Benchmarks never import the tests"),
    ("api/chat/routes.py", "from harness import servers", "The app imports none of what checks it"),
    # A cycle hidden behind TYPE_CHECKING is a cycle all the same.
    (
        "engine/generation.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from app.engine import engine",
        "No cycles are allowed in app.engine",
    ),
]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> str:
    """lint-imports' report on a copy with every break written in."""
    result = lint_copy(tmp_path_factory.mktemp("broken"), [(module, line) for module, line, _ in BREAKS])
    assert result.returncode != 0, result.stdout
    return result.stdout


@pytest.mark.parametrize(("module", "line", "broken"), BREAKS)
def test_breaking_a_layer_fails(report: str, module: str, line: str, broken: str) -> None:
    """The contract is reported broken, and by this very import (the report names each chain)."""
    importer = module.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    importer = importer if importer.split(".")[0] in ("tests", "bench", "harness") else f"app.{importer}"
    imported = line.splitlines()[-1].split()[1]  # `import x` or `from x import y`: the module x
    if broken.startswith("No cycles"):  # a cycle's report names modules within the package
        importer, imported = (f".{name.rsplit('.', 1)[1]}" for name in (importer, imported))
    flat = " ".join(report.split())
    assert " ".join(broken.split()) in flat, report
    assert f"{importer} -> {imported}" in flat, report
