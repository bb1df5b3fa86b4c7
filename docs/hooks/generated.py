"""mkdocs hook: the parts of the site the code writes, so that they cannot drift from it.

- `configuration.md`: the table of every `LLM_*` setting (variable, default, meaning) from the
  settings declared in `app/settings/config.py`, and the keys of an `LLM_MODELS` entry with the
  type and bounds its schema (`app/settings/model_entries.py`) holds them to;
- `api/errors.md`: the table of every error class a client can meet, with its status in each
  family's shape, from the error tree (`app/api/http/errors.py`) and Anthropic's mapping;
- `operations/drain-reload.md`: every route of the OpenAPI document, refused or answered while
  the server drains, as the drain's own rule (`app/api/access/draining.py`) decides;
- `api/index.md`: every route of the OpenAPI document with its summary;
- `api/openapi.json`: the OpenAPI document the server serves at `/openapi.json`, built by the same
  code from the same schemas, which `api/openapi.md` renders (neoteroi's OAD plugin).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

# mkdocs loads a hook by its path, with the project's root not on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from app.api.access.draining import starts_work  # noqa: E402
from app.api.anthropic import errors as anthropic_errors  # noqa: E402
from app.api.http import errors  # noqa: E402
from app.api.ollama import errors as ollama_errors  # noqa: E402
from app.api.openapi import document_of  # noqa: E402
from app.settings.config import Config  # noqa: E402
from app.settings.model_entries import ModelEntrySchema  # noqa: E402
from app.settings.startup import describe_settings  # noqa: E402

SETTINGS_MARK = "<!-- generated: settings -->"
ENTRY_MARK = "<!-- generated: model entry keys -->"
ERRORS_MARK = "<!-- generated: errors -->"
DRAIN_MARK = "<!-- generated: drain routes -->"
ROUTES_MARK = "<!-- generated: routes -->"
# The OAD plugin reads the document from a path before the site is written: the hook puts it here.
DOCUMENT = Path("build/docs/openapi.json")


def settings_table() -> str:
    """Markdown: one row per setting, in the order they are declared."""
    rows = ["| Variable | Default | Meaning |", "|---|---|---|"]
    for env, default, meaning in describe_settings():
        rows.append(f"| `{env}` | {_cell(default) or '—'} | {_cell(meaning)} |")
    return "\n".join(rows)


def entry_table() -> str:
    """Markdown: each key of an `LLM_MODELS` entry and what its schema accepts."""
    rows = ["| Key | Accepts |", "|---|---|"]
    for name, field in ModelEntrySchema().fields.items():
        key = field.data_key or name
        rows.append(f"| `{key}` | {_cell(_accepts(key, field))} |")
    return "\n".join(rows)


def _accepts(key: str, field: Any) -> str:
    """The schema's own words for a key: the message it gives a wrong value, minus the key's name."""
    wrong = getattr(field, "wrong", None)
    if wrong:
        return str(wrong).removeprefix(f"{key} ").removeprefix("needs ")
    if key in ("path", "draft"):
        return "a GGUF file that exists" + (" (required)" if field.required else "")
    return 'a list of {"id", "path", "scale"} (LoRA adapters)'


def error_classes() -> list[type[errors.APIError]]:
    """Every error class of the tree (Ollama's own included; not the base), by status, then name."""
    found: list[type[errors.APIError]] = []
    todo = list(errors.APIError.__subclasses__())
    while todo:
        kind = todo.pop()
        found.append(kind)
        todo.extend(kind.__subclasses__())
    assert ollama_errors.ManagedByConfigurationError in found
    return sorted(found, key=lambda kind: (kind.status, kind.__name__))


def errors_table() -> str:
    """Markdown: one row per error class: its status and fields in OpenAI's shape, its status and
    type in Anthropic's, and when it is raised (its docstring)."""
    rows = [
        "| Status | OpenAI `type` | `code` | Anthropic status, `type` | When |",
        "|---|---|---|---|---|",
    ]
    for kind in error_classes():
        # KeyLimitError also takes the headers it answers with.
        error = errors.KeyLimitError("", {}) if kind is errors.KeyLimitError else kind("")
        anthropic = anthropic_errors.body(error)["error"]["type"]
        when = " ".join((kind.__doc__ or "").split())
        code = f"`{error.code}`" if error.code else "—"
        rows.append(
            f"| {error.status} | `{error.type}` | {code} | {anthropic_errors.status_of(error)}, "
            f"`{anthropic}` | {_cell(when)} |"
        )
    return "\n".join(rows)


def drain_table() -> str:
    """Markdown: each route of the document and what a drain does to it (the code's own rule)."""
    document = document_of(Config.from_env({}))
    refused: list[str] = []
    answered: list[str] = []
    for path, operations in sorted(document["paths"].items()):
        for method in operations:
            (refused if starts_work(method.upper(), path) else answered).append(f"`{method.upper()} {path}`")
    return (
        f"Refused with a 503 ({len(refused)} routes): {', '.join(refused)}.\n\n"
        f"Answered as usual ({len(answered)} routes): {', '.join(answered)}."
    )


def routes_table() -> str:
    """Markdown: each route of the document (as a server on the default settings serves it), by path,
    with its operation's summary."""
    document = document_of(Config.from_env({}))
    rows = ["| Route | What it does |", "|---|---|"]
    for path, operations in sorted(document["paths"].items()):
        for method, operation in operations.items():
            if method in ("get", "post", "put", "patch", "delete"):
                rows.append(f"| `{method.upper()} {path}` | {_cell(operation.get('summary', ''))} |")
    return "\n".join(rows)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Write the OpenAPI document of a server on the default settings, before any page is read."""
    document = document_of(Config.from_env({}))
    DOCUMENT.parent.mkdir(parents=True, exist_ok=True)
    DOCUMENT.write_text(json.dumps(document, indent=1) + "\n")
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """The document is also a file of the site, to download or to point a client generator at."""
    files.append(File.generated(config, "api/openapi.json", content=DOCUMENT.read_text()))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if page.file.src_uri == "operations/drain-reload.md":
        if DRAIN_MARK not in markdown:
            raise ValueError(f"operations/drain-reload.md lost its {DRAIN_MARK!r} line")
        return markdown.replace(DRAIN_MARK, drain_table())
    if page.file.src_uri == "api/index.md":
        if ROUTES_MARK not in markdown:
            raise ValueError(f"api/index.md lost its {ROUTES_MARK!r} line")
        return markdown.replace(ROUTES_MARK, routes_table())
    if page.file.src_uri == "api/errors.md":
        if ERRORS_MARK not in markdown:
            raise ValueError(f"api/errors.md lost its {ERRORS_MARK!r} line")
        return markdown.replace(ERRORS_MARK, errors_table())
    if page.file.src_uri != "configuration.md":
        return markdown
    for mark in (SETTINGS_MARK, ENTRY_MARK):
        if mark not in markdown:
            raise ValueError(f"configuration.md lost its {mark!r} line")
    return markdown.replace(SETTINGS_MARK, settings_table()).replace(ENTRY_MARK, entry_table())
