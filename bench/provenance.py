"""Where a benchmark ran, for its result file: the date, the commit, the CPU and its cores, the versions.

A figure is only checkable with what made it: every program's markdown opens with this
line, so a result file says when, on which code and on which machine it was measured.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu_model() -> str:
    """The CPU's name as the kernel reports it (x86's `model name`), else the architecture."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def commit() -> str:
    """The commit measured (short), marked when the tree had changes not committed."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head} with changes not committed" if dirty else head


def line() -> str:
    """One sentence: when, on what code and on what machine the run was made."""
    try:
        llama = metadata.version("llama_cpp_python")
    except metadata.PackageNotFoundError:
        llama = "not installed"
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    return (
        f"Run on {today} at commit `{commit()}`, on {cpu_model()} ({os.cpu_count()} cores, "
        f"{platform.machine()}), Python {platform.python_version()}, llama-cpp-python {llama}."
    )
