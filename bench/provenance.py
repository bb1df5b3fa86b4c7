"""Where a benchmark ran, for its result file: the date, the commit, the CPU and its cores, the versions.

A figure is only checkable with what made it: every program's report opens with this line, and
every run it records (harness/recorded_runs.py) carries the same facts as data, with the command, its
repeats and how each server compared was built.
"""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

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


def version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def line() -> str:
    """One sentence: when, on what code and on what machine the run was made."""
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    return (
        f"Run on {today} at commit `{commit()}`, on {cpu_model()} ({os.cpu_count()} cores, "
        f"{platform.machine()}), Python {platform.python_version()}, "
        f"llama-cpp-python {version('llama_cpp_python')}."
    )


def facts(program: str, repeats: int | None, builds: dict[str, str]) -> dict[str, Any]:
    """The run's provenance as data: `builds` names each server compared and how it was built."""
    ours = (
        f"this repository at {commit()}: gunicorn {version('gunicorn')} with gevent {version('gevent')}, "
        f"llama-cpp-python {version('llama_cpp_python')} built by deploy/llama-cpp/wheel.sh"
    )
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%MZ"),
        "commit": commit(),
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "arch": platform.machine()},
        "versions": {
            "python": platform.python_version(),
            **{name: version(name) for name in ("llama_cpp_python", "gunicorn", "gevent", "flask")},
        },
        "command": shlex.join(["python", "-m", f"bench.{program}", *sys.argv[1:]]),
        "repeats": repeats,
        "servers": {"ours": ours, **builds},
    }
