"""Every default the docs state beside a setting is the default the settings declare.

The configuration page's table is generated from the declarations; prose elsewhere names
defaults too ("`LLM_MAX_QUEUE` (8)", "`LLM_PARALLEL` (default 4)", "`LLM_SSE_KEEPALIVE` (5 s)"), and
pages' own tables of settings ("| `LLM_MCP_TIMEOUT` | 30 | ...").
Each such statement in docs/ and the README is read here and compared with the declaration,
so a changed default cannot leave a page behind.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.settings.config import Config
from app.settings.startup import describe_settings
from app.settings.values import default_model_path

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
STATED = re.compile(r"`(LLM_[A-Z0-9_]+)`\s*\((?:default:?\s*)?([0-9][0-9.,]*)\s*(s|ms|MiB|MB)?\)")
TABLED = re.compile(r"^\|\s*`(LLM_[A-Z0-9_]+)`\s*\|\s*([0-9][0-9.,]*)\s*(s|ms|MiB|MB)?\s*\|", re.M)
# "**`LLM_SWA_FULL`** (default 1; ...", "`LLM_CTX_CHECKPOINTS`, default 8 per sequence"
NAMED = re.compile(
    r"`(LLM_[A-Z0-9_]+)`\**,?\s*\(?(?:by\s+)?default:?\s+([0-9][0-9.,]*[0-9]|[0-9])\s*(s|ms|MiB|MB)?\b"
)
UNITS = {None: 1, "s": 1, "ms": 0.001, "MB": 1, "MiB": 1 << 20}


def statements() -> list[tuple[str, str, float]]:
    """(where, setting, value) for every default stated beside a setting's name."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in [*STATED.finditer(text), *TABLED.finditer(text), *NAMED.finditer(text)]:
            env, number, unit = match.groups()
            value = float(number.replace(",", "")) * UNITS[unit]
            found.append((f"{page.relative_to(ROOT)}: {match.group(0)}", env, value))
    return found


def test_the_docs_state_defaults_in_many_places() -> None:
    assert len(statements()) >= 10  # the pattern still finds what the pages write


@pytest.mark.parametrize(("where", "env", "value"), statements(), ids=[s[0] for s in statements()])
def test_a_stated_default_is_the_declared_one(where: str, env: str, value: float) -> None:
    declared = {name: default for name, default, _ in describe_settings()}
    assert env in declared, f"{where}: no setting is called {env}"
    if not declared[env]:  # worked out from other settings at start-up: the value they give by default
        derived = getattr(Config.from_env(CONDITIONS.get(env, {})), env.removeprefix("LLM_").lower())
        assert float(derived) == value, f"{where}: worked out as {derived!r}"
        return
    assert float(declared[env]) == value, f"{where}: declared {declared[env]!r}"


# Defaults a page states under a condition it names: the settings that meet it.
_MODEL = str(default_model_path())
CONDITIONS = {  # "LLM_ON_DEMAND_WORKERS (default 1 when an entry loads on demand)"
    "LLM_ON_DEMAND_WORKERS": {
        "LLM_MODELS": json.dumps(
            [{"id": "a", "path": _MODEL}, {"id": "b", "path": _MODEL, "load": "on_demand"}]
        )
    }
}
