#!/usr/bin/env bash
# What `make install` (and so `make serve` and `make test`) needs of the machine before it
# builds anything: Python 3.11+ with venv and its headers, a C/C++ compiler and CMake
# (llama-cpp-python and llama.cpp's JSON schema converter are compiled from source).
# Missing any, it stops with one line naming them and the command that installs them,
# rather than failing in the middle of pip's output.
#   build-needs.sh PYTHON             check; exit 1 with that line if something is missing
#   build-needs.sh PYTHON --packages  print the missing Debian packages (for .ci/system-packages)
set -uo pipefail
python="${1:?usage: build-needs.sh PYTHON [--packages]}"

debian=() fedora=() what=()
if ! command -v "$python" >/dev/null; then
  what+=("Python 3.11+ ($python)"); debian+=(python3 python3-venv python3-dev); fedora+=(python3 python3-devel)
elif ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  what+=("Python 3.11+ ($python is $("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])'))")
  debian+=(python3); fedora+=(python3)
else
  "$python" -c 'import ensurepip, venv' 2>/dev/null || { what+=("Python's venv"); debian+=(python3-venv); fedora+=(python3); }
  "$python" -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    || { what+=("Python's headers"); debian+=(python3-dev); fedora+=(python3-devel); }
fi
{ command -v cc >/dev/null || command -v gcc >/dev/null; } || { what+=("a C compiler"); debian+=(gcc); fedora+=(gcc); }
{ command -v c++ >/dev/null || command -v g++ >/dev/null; } || { what+=("a C++ compiler"); debian+=(g++); fedora+=(gcc-c++); }
command -v cmake >/dev/null || { what+=("CMake"); debian+=(cmake); fedora+=(cmake); }

if [ "${2:-}" = --packages ]; then
  echo "${debian[*]}"
  exit 0
fi
[ ${#what[@]} -eq 0 ] && exit 0
list=$(IFS=,; echo "${what[*]}" | sed 's/,/, /g')
echo "make install needs ${list}: on Debian or Ubuntu, sudo apt-get install ${debian[*]}; on Fedora, sudo dnf install ${fedora[*]}" >&2
exit 1
