"""The README and the docs name files that exist: a moved module fails here, not in a newcomer's hands."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# `app/...`, `harness/...`, `tests/...`, `bench/...`, `deploy/...`, `docs/...` written as paths in backticks.
_PATH = re.compile(r"`((?:app|harness|tests|bench|deploy|docs)/[\w./-]*)`")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(ROOT)) for page in PAGES])
def test_every_path_a_page_names_exists(page: Path) -> None:
    named = set(_PATH.findall(page.read_text()))
    # A hidden folder (bench/.peer-venv) is made when a program first runs, not kept in the tree.
    missing = sorted(p for p in named if "/." not in p and not (ROOT / p.rstrip(".")).exists())
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_the_pages_name_enough_paths_for_the_check_to_mean_something() -> None:
    named = {path for page in PAGES for path in _PATH.findall(page.read_text())}
    assert len(named) > 100, "the pattern found too few paths to prove anything"
