"""llama.cpp's own log: its warnings printed as before, and what a model's load says kept for the server.

llama.cpp says where it put a model only in its log, at the INFO level this server does not
print: how many layers went to a GPU, and each device's share of the weights and of the KV
cache. `recording()` keeps those lines while a model loads; `placement` reads them.
"""

from __future__ import annotations

import ctypes
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import llama_cpp

_WARN, _ERROR, _CONTINUED = 3, 4, 5  # ggml_log_level
_recorded: list[tuple[int, str]] | None = None
_last_level = 0


@llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
def _callback(level: int, text: bytes, _user_data: Any) -> None:
    global _last_level
    level = _last_level if level == _CONTINUED else level
    _last_level = level
    decoded = text.decode("utf-8", errors="replace")
    # Its warnings printed, as llama-cpp-python's own callback prints them when not verbose; its
    # errors are why a load failed, which `recording` puts in the one line the server says of it.
    if level == _WARN:
        print(decoded, end="", flush=True, file=sys.stderr)
    if _recorded is not None:
        _recorded.append((level, decoded))


@cache
def install() -> None:
    """llama.cpp's log through this module from now on (the callback lives as long as the module)."""
    llama_cpp.llama_log_set(_callback, ctypes.c_void_p(0))


@dataclass
class Recording:
    """What llama.cpp logged inside a `recording()` block, as lines: all of them, and its errors."""

    lines: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@contextmanager
def recording() -> Iterator[Recording]:
    """What llama.cpp logs inside the block (filled when it ends). One load at a time: a worker's
    models load one after another in its native thread.

    llama-cpp-python's ValueError for a failed load says only that it failed ("Failed to load
    model from file"); raised inside the block, it leaves with llama.cpp's last error line added,
    which says why (a device buffer it could not allocate, a tensor too large for one)."""
    global _recorded
    kept = Recording()
    _recorded = []
    try:
        yield kept
    except ValueError as failed:
        _keep(kept)
        raise ValueError(f"{failed}: {why}" if (why := _why(kept.errors)) else str(failed)) from None
    finally:
        _keep(kept)


def _why(errors: list[str]) -> str | None:
    """llama.cpp's own reason: the message of the exception its loader caught, else its first error."""
    for line in errors:
        if (at := line.find(_CAUGHT)) >= 0:
            return line[at + len(_CAUGHT) :]
    return errors[0] if errors else None


_CAUGHT = "error loading model: "  # llama.cpp's llama_model_load, before the exception's message


def _keep(kept: Recording) -> None:
    global _recorded
    if _recorded is None:
        return
    for wanted, into in ((None, kept.lines), (_ERROR, kept.errors)):
        text = "".join(chunk for level, chunk in _recorded if wanted in (None, level))
        into.extend(line.strip() for line in text.splitlines() if line.strip())
    _recorded = None


@dataclass(frozen=True)
class Placement:
    """Where a model's load put it: layers offloaded to a GPU, and MiB per device buffer."""

    layers: int = 0
    of: int = 0
    buffers: dict[str, dict[str, float]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"layers_offloaded": self.layers, "layers": self.of, "buffers": self.buffers}

    def described(self) -> str:
        """One clause for the start-up line: '31/31 layers on the GPU: Vulkan0 model 80.1 MiB, KV 9.0 MiB'."""
        shares = "; ".join(
            f"{device} " + ", ".join(f"{kind} {mib:.1f} MiB" for kind, mib in kinds.items())
            for device, kinds in self.buffers.items()
        )
        return f"{self.layers}/{self.of} layers on the GPU: {shares}"


_OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
_BUFFER = re.compile(r":\s+(\S+) (model|KV) buffer size =\s+([\d.]+) MiB")


def placement(lines: list[str]) -> Placement:
    """Read off llama.cpp's load log (llama-model.cpp's load_tensors, llama-kv-cache.cpp)."""
    layers = of = 0
    buffers: dict[str, dict[str, float]] = {}
    for line in lines:
        if found := _OFFLOADED.search(line):
            layers, of = int(found.group(1)), int(found.group(2))
        elif found := _BUFFER.search(line):
            device, kind, mib = found.group(1), found.group(2), float(found.group(3))
            shares = buffers.setdefault(device, {})
            shares[kind] = shares.get(kind, 0.0) + mib
    return Placement(layers, of, buffers)
