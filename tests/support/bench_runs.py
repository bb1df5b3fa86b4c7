"""Running a benchmark program as a user runs it, for the smoke tests that keep bench/ from rotting."""

from __future__ import annotations

import subprocess
import sys

from harness.servers import ROOT


def bench(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m bench.<module>` with `args`, from the checkout, its output captured."""
    command = [sys.executable, "-m", f"bench.{module}", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=3500)
