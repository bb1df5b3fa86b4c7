"""The site as `make docs` builds it, built once for every docs test that reads it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice of its successor, on every build
    return subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as `make docs` builds it: --strict, so a warning (a broken link or anchor, a page
    left out of the navigation, a generated page that lost its marker) fails the build."""
    out = tmp_path_factory.mktemp("site")
    built = build(ROOT / "mkdocs.yml", out)
    assert built.returncode == 0, built.stderr
    return out
