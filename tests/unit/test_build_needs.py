"""`make install` on a machine that lacks what the build needs stops at once, saying what and how.

Real make and bash, on a PATH that holds Python and the basic tools but no compiler and no
CMake (a bare Debian box has neither): the first step of the install, the venv's, stops
with the line, and nothing is built or created.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("bash", "sh", "make", "sed", "env", "cat", "dirname", "id")


def bare_path(folder: Path) -> str:
    """A folder of links to Python and the basic tools alone, as PATH."""
    folder.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, tool
        (folder / tool).symlink_to(found)
    (folder / "python3").symlink_to(sys.executable)
    return str(folder)


def test_make_install_on_a_machine_without_compilers_stops_with_one_line(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    done = subprocess.run(
        ["make", "install", f"VENV={venv}", "PYTHON=python3"],
        cwd=ROOT,
        env={**os.environ, "PATH": bare_path(tmp_path / "bin")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("make install needs")]
    assert "a C compiler, a C++ compiler, CMake" in line
    assert "sudo apt-get install gcc g++ cmake" in line and "sudo dnf install gcc gcc-c++ cmake" in line
    assert not venv.exists()  # stopped before anything was made


def test_a_machine_with_everything_passes_and_names_no_package() -> None:
    done = subprocess.run(
        ["bash", "deploy/build-needs.sh", sys.executable, "--packages"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and done.stdout.strip() == ""
    assert subprocess.run(["bash", "deploy/build-needs.sh", sys.executable], cwd=ROOT).returncode == 0


def test_an_old_or_missing_python_is_named(tmp_path: Path) -> None:
    old = tmp_path / "python3.9"  # a Python 3.9, as far as the checks can tell
    old.write_text('#!/bin/sh\ncase "$2" in *"< (3, 11)"*) exit 1;; *) echo 3.9;; esac\n')
    old.chmod(0o755)
    for python, says in ((str(tmp_path / "missing"), "Python 3.11+ ("), (str(old), "is 3.9")):
        done = subprocess.run(
            ["bash", "deploy/build-needs.sh", python], cwd=ROOT, capture_output=True, text=True
        )
        assert done.returncode == 1 and says in done.stderr, done.stderr
