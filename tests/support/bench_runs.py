"""Running a benchmark program as a user runs it, for the smoke tests that keep bench/ from rotting."""

from __future__ import annotations

import os
import subprocess
import sys

from harness.servers import ROOT

# The slow tier runs two pytest processes on two cores: a benchmark whose servers each spin two
# llama.cpp threads beside the other process's work waits at every barrier for a thread that is
# not running (the speculation benchmark's smoke run, beside one busy core: 322 s, 173 s so).
ONE_THREAD = ("--threads", "1")


def bench(module: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m bench.<module>` with `args` (and `env` added), from the checkout, its output captured."""
    command = [sys.executable, "-m", f"bench.{module}", *args]
    environment = {**os.environ, **(env or {})}
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=3500, env=environment)
