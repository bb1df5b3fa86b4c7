"""A GGUF file's metadata (its key-value header), read without llama.cpp and without the weights.

gguf's own reader parses every array (a 150,000-token vocabulary, token by token), which
takes seconds; listing models should not. This reads the header alone and keeps scalars
and short arrays, skipping the long ones by their lengths.
"""

from __future__ import annotations

import mmap
import struct
from functools import lru_cache
from pathlib import Path
from typing import Any

_SCALARS = {  # GGUF value type -> struct format
    0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d",
}  # fmt: skip
_STRING, _ARRAY = 8, 9
KEPT_ARRAY = 64  # longer arrays (vocabularies, merges) are skipped


@lru_cache(maxsize=64)
def read(path: str, mtime: float = 0.0) -> dict[str, Any]:
    """The header's keys and values (long arrays left out); `mtime` keys the cache to the file's version."""
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if data[:4] != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        _, _, count = struct.unpack_from("<IQQ", data, 4)
        offset, found = 24, {}
        for _ in range(count):
            key, offset = _string(data, offset)
            (kind,) = struct.unpack_from("<I", data, offset)
            value, offset = _value(data, offset + 4, kind)
            if value is not _SKIPPED:
                found[key] = value
        return found


def of(path: str) -> dict[str, Any]:
    """`read`, fresh whenever the file changes."""
    return read(path, Path(path).stat().st_mtime)


def pooling_type(path: str) -> int | None:
    """The pooling type the GGUF names (llama.cpp's numbers: 4 is a reranker's), None if it names
    none or cannot be read."""
    try:
        header = of(path)
    except (OSError, ValueError, struct.error):
        return None
    value = header.get(f"{header.get('general.architecture')}.pooling_type")
    return value if isinstance(value, int) else None


def tokens(path: str) -> list[bytes]:
    """The vocabulary's tokens (`tokenizer.ggml.tokens`) as the file stores them, unchecked bytes;
    [] if it has none."""
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if data[:4] != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        _, _, count = struct.unpack_from("<IQQ", data, 4)
        offset = 24
        for _ in range(count):
            key, offset = _string(data, offset)
            (kind,) = struct.unpack_from("<I", data, offset)
            if key == "tokenizer.ggml.tokens" and kind == _ARRAY:
                return _raw_strings(data, offset + 4)
            _, offset = _value(data, offset + 4, kind)
        return []


def _raw_strings(data: mmap.mmap, offset: int) -> list[bytes]:
    item_kind, length = struct.unpack_from("<IQ", data, offset)
    if item_kind != _STRING:
        return []  # llama.cpp refuses the file itself
    offset, found = offset + 12, []
    for _ in range(length):
        (size,) = struct.unpack_from("<Q", data, offset)
        found.append(bytes(data[offset + 8 : offset + 8 + size]))
        offset += 8 + size
    return found


_SKIPPED = object()


def _string(data: mmap.mmap, offset: int) -> tuple[str, int]:
    (size,) = struct.unpack_from("<Q", data, offset)
    start = offset + 8
    return bytes(data[start : start + size]).decode("utf-8", errors="replace"), start + size


def _value(data: mmap.mmap, offset: int, kind: int) -> tuple[Any, int]:
    if kind == _STRING:
        return _string(data, offset)
    if kind in _SCALARS:
        fmt = "<" + _SCALARS[kind]
        return struct.unpack_from(fmt, data, offset)[0], offset + struct.calcsize(fmt)
    if kind != _ARRAY:
        raise ValueError(f"unknown GGUF value type {kind}")
    item_kind, length = struct.unpack_from("<IQ", data, offset)
    offset += 12
    if item_kind in _SCALARS and length > KEPT_ARRAY:  # fixed width: skip at once
        return _SKIPPED, offset + length * struct.calcsize("<" + _SCALARS[item_kind])
    items = []
    for _ in range(length):
        item, offset = _value(data, offset, item_kind)
        items.append(item)
    return (items if length <= KEPT_ARRAY else _SKIPPED), offset
