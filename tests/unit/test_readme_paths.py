"""README's layout names files that exist: a moved module fails here, not in a newcomer's hands."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# `app/...`, `harness/...`, `tests/...`, `bench/...`, `deploy/...` written as paths in backticks.
_PATH = re.compile(r"`((?:app|harness|tests|bench|deploy|docs)/[\w./-]*)`")


def test_every_path_in_the_readme_exists() -> None:
    named = set(_PATH.findall((ROOT / "README.md").read_text()))
    assert len(named) > 30, "the pattern found too few paths to prove anything"
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"README.md names paths that do not exist: {missing}"
