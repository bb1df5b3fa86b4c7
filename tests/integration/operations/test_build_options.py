"""LLAMA_CMAKE_ARGS after a first install: the Makefile builds that wheel, and keeps the AMX flags.

The options are recorded in `$(VENV)/.llama-cmake-args`, rewritten only when they change, and
the install's target depends on it; run here against a venv folder of its own (its `python`
a link to this one), so that nothing is built or installed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from harness.servers import ROOT


def make(venv: Path, *targets: str, cmake_args: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "LLAMA_CMAKE_ARGS"}
    if cmake_args is not None:
        env["LLAMA_CMAKE_ARGS"] = cmake_args
    command = ["make", "-C", str(ROOT), f"VENV={venv}", *targets]
    return subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout


def test_the_build_options_are_recorded_and_a_change_reaches_the_install(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    stamp = venv / ".llama-cmake-args"
    make(venv, str(stamp))
    default = stamp.read_text()
    assert "-DGGML_NATIVE=ON" in default and "-mno-amx-tile" in default
    os.utime(stamp, (1_000_000_000, 1_000_000_000))
    make(venv, str(stamp))
    assert stamp.stat().st_mtime == 1_000_000_000  # the same options: not rewritten, nothing rebuilt
    make(venv, str(stamp), cmake_args="-DGGML_NATIVE=OFF -DGGML_CUDA=ON")
    changed = stamp.read_text()
    assert stamp.stat().st_mtime > 1_000_000_000
    assert changed.startswith(default.strip())  # ours first, the AMX flags kept
    assert changed.strip().endswith("-DGGML_NATIVE=OFF -DGGML_CUDA=ON")  # then the user's, which win
    # The install's target depends on the record: a newer record makes it run again.
    database = subprocess.run(
        ["make", "-C", str(ROOT), f"VENV={venv}", "-p", "-n", "-q", "does-not-exist-target"],
        capture_output=True,
        text=True,
    ).stdout
    (rule,) = re.findall(rf"^{re.escape(str(venv))}/\.installed:(.*)$", database, flags=re.M)
    assert f"{venv}/.llama-cmake-args" in rule.split()
