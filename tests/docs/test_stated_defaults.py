"""Every default the docs state beside a setting is the default the settings declare.

The configuration page's table is generated from the declarations; prose elsewhere names
defaults too ("`LLM_MAX_QUEUE` (8)", "`LLM_PARALLEL` (default 4)", "`LLM_SSE_KEEPALIVE` (5 s)").
Each such statement in docs/ and the README is read here and compared with the declaration,
so a changed default cannot leave a page behind.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.settings.startup import describe_settings

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
STATED = re.compile(r"`(LLM_[A-Z0-9_]+)`\s*\((?:default:?\s*)?([0-9][0-9.,]*)\s*(s|ms|MiB|MB)?\)")
UNITS = {None: 1, "s": 1, "ms": 0.001, "MB": 1, "MiB": 1 << 20}


def statements() -> list[tuple[str, str, float]]:
    """(where, setting, value) for every default stated beside a setting's name."""
    found = []
    for page in PAGES:
        for match in STATED.finditer(page.read_text()):
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
    assert declared[env] and float(declared[env]) == value, f"{where}: declared {declared[env]!r}"
