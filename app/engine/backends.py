"""llama.cpp's CPU backend: loaded by hand where the build made one module per CPU variant.

The image's llama.cpp is built portable (deploy/llama-cpp/wheel.sh, LLAMA_PORTABLE=1): every
CPU variant llama.cpp knows is a module of its own (libggml-cpu-haswell.so, -zen4...), and
none is registered until one is loaded. llama.cpp's own search looks beside the executable
(python) and in the working directory, not beside its library, so a model would fail to
load with "no backends are loaded". The wheel for this machine links its one CPU backend
in, which registers itself: there is nothing to load then, and no variant to name.
"""

from __future__ import annotations

import ctypes
import re
from functools import cache
from pathlib import Path

import llama_cpp

LIBRARIES = Path(llama_cpp.__file__).parent / "lib"
_VARIANT = re.compile(r"/libggml-cpu-([\w.]+)\.so\s*$")


@cache
def load() -> None:
    """Register the best CPU variant for this CPU (each module scores the CPU it runs on), once."""
    ggml = registry()
    if ggml.ggml_backend_reg_count() == 0:
        ggml.ggml_backend_load_all_from_path(str(LIBRARIES).encode())


def registry() -> ctypes.CDLL:
    """ggml's backend registry, as libllama sees it.

    Through libllama's handle (llama_cpp's own, already open), whose symbol lookup runs through
    the libraries it was linked with: the wheel holds libggml.so and libggml.so.0 as two files,
    not a link, and a registry opened by the other name would be another copy, empty to llama.cpp.
    """
    libllama = ctypes.CDLL(str(LIBRARIES / "libllama.so"))
    libllama.ggml_backend_reg_count.restype = ctypes.c_size_t
    libllama.ggml_backend_load_all_from_path.argtypes = [ctypes.c_char_p]
    return libllama


def cpu_variant(maps: str | None = None) -> str | None:
    """The CPU variant this process loaded ("zen4", "haswell"...), None where the build links
    its one CPU backend in. Read from the process's mapped files (`maps`: their text)."""
    if maps is None:
        try:
            maps = Path("/proc/self/maps").read_text()
        except OSError:  # not Linux (macOS has no /proc): the variant goes unnamed
            return None
    for line in maps.splitlines():
        if found := _VARIANT.search(line):
            return found.group(1)
    return None
