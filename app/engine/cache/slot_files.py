"""A sequence's KV state in a file (slots and the disk cache), verified before it is used.

The file holds what the sequence's cells hold (the tokens, then llama.cpp's state of them,
then the context checkpoints of a memory that cannot be cut back), after a header that says
which model and settings made it (the engine's fingerprint: the llama.cpp build, the model
file, the KV layout) and the SHA-256 of the rest. A file from another model, other settings,
or cut short or altered, is refused with the reason; it is never loaded into a context.
Files are written whole or not at all (a temporary file, then renamed over the name).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from app.engine.checkpoints import Checkpoint

MAGIC = b"LLMSLOT1\n"
MAX_HEADER = 4096
PARTIAL = ".partial"  # the suffix of a file being written


class SlotFileError(Exception):
    """A slot file that cannot be used here; the message says why."""


class SlotRefusedError(SlotFileError):
    """A slot that the request asked for cannot be saved as it is (its cells are not the plain
    model's): the requester's doing, not the server's failure."""


@dataclass(frozen=True)
class SlotFile:
    """A sequence's tokens, llama.cpp's saved state of its cells, and where that state resumes."""

    tokens: list[int]
    state: bytes
    live_from: int = 0  # the first position a sliding window's cells still hold
    checkpoints: tuple[Checkpoint, ...] = ()
    scope: str = ""  # whose prompt it holds (the cache scope): resumed by that scope only


def write(path: Path, fingerprint: str, saved: SlotFile) -> int:
    """Write `saved` to `path` (whole or not at all); the bytes written."""
    tokens = np.asarray(saved.tokens, dtype="<i4").tobytes()
    parts = [tokens, saved.state, *(c.state for c in saved.checkpoints)]
    header: dict[str, Any] = {
        "fingerprint": fingerprint,
        "tokens": len(saved.tokens),
        "state": len(saved.state),
        "live_from": saved.live_from,
        "checkpoints": [[c.position, len(c.state)] for c in saved.checkpoints],
    }
    if saved.scope:
        header["scope"] = saved.scope
    header["sha256"] = _digest(header, b"".join(parts))
    partial = path.with_name(f".{path.name}.{os.getpid()}{PARTIAL}")
    with partial.open("wb") as out:
        out.write(MAGIC + json.dumps(header).encode() + b"\n")
        for part in parts:
            out.write(part)
        out.flush()
        os.fsync(out.fileno())
        written = out.tell()
    partial.replace(path)
    return written


def read_listing(path: Path, fingerprint: str) -> tuple[list[int], int, tuple[int, ...], str]:
    """The tokens of the slot file at `path`, if this model made it, with where its state resumes (its
    live range's start and its checkpoints' positions) and its cache scope; the state is neither
    read nor checked."""
    with _opened(path) as source:
        header = _header(source, fingerprint)
        tokens = _tokens(source.read(4 * header["tokens"]), header["tokens"])
    return (
        tokens,
        header["live_from"],
        tuple(position for position, _ in header["checkpoints"]),
        header["scope"],
    )


def read(path: Path, fingerprint: str) -> tuple[SlotFile, int]:
    """The slot file at `path` if this model and these settings made it and it is whole; its size."""
    with _opened(path) as source:
        header = _header(source, fingerprint)
        rest = source.read()
    n_tokens, n_state = header["tokens"], header["state"]
    sizes = [4 * n_tokens, n_state, *(size for _, size in header["checkpoints"])]
    if len(rest) != sum(sizes):
        raise SlotFileError("it is cut short or has bytes too many")
    if _digest(header, rest) != header.get("sha256"):
        raise SlotFileError("its contents do not match their checksum")
    parts, start = [], 0
    for size in sizes:
        parts.append(rest[start : start + size])
        start += size
    checkpoints = tuple(
        Checkpoint(position, state)
        for (position, _), state in zip(header["checkpoints"], parts[2:], strict=True)
    )
    saved = SlotFile(_tokens(parts[0], n_tokens), parts[1], header["live_from"], checkpoints, header["scope"])
    return saved, start + header["at"]


def _digest(header: dict[str, Any], rest: bytes) -> str:
    """The checksum of a file's contents and of the header fields that say where its state resumes."""
    layout = [header["tokens"], header["state"], header["live_from"], header["checkpoints"]]
    if header.get("scope"):  # (files of the shared scope have the checksum they always had)
        layout.append(header["scope"])
    return hashlib.sha256(json.dumps(layout).encode() + rest).hexdigest()


def _opened(path: Path) -> BinaryIO:
    try:
        return path.open("rb")
    except FileNotFoundError:
        raise SlotFileError("no such slot file") from None


def _header(source: BinaryIO, fingerprint: str) -> dict[str, Any]:
    """The checked header of an open slot file, with `at`: where its tokens begin."""
    start = source.read(len(MAGIC) + MAX_HEADER)
    if not start.startswith(MAGIC):
        raise SlotFileError("not a slot file of this server")
    end = start.find(b"\n", len(MAGIC))
    try:
        header = json.loads(start[len(MAGIC) : end]) if end > 0 else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or not _well_formed(header):
        raise SlotFileError("its header is unreadable")
    if header["fingerprint"] != fingerprint:
        raise SlotFileError("it was saved by another model, llama.cpp build or KV settings")
    header["at"] = end + 1
    source.seek(end + 1)
    return header


def _well_formed(header: dict[str, Any]) -> bool:
    counts = [header.get("tokens"), header.get("state"), header.setdefault("live_from", 0)]
    if not isinstance(header.setdefault("scope", ""), str):
        return False
    marks = header.setdefault("checkpoints", [])
    if not isinstance(marks, list) or not all(isinstance(m, list) and len(m) == 2 for m in marks):
        return False
    return all(isinstance(n, int) and n >= 0 for n in counts + [n for m in marks for n in m])


def _tokens(raw: bytes, count: int) -> list[int]:
    if len(raw) != 4 * count:
        raise SlotFileError("it is cut short or has bytes too many")
    tokens: list[int] = np.frombuffer(raw, dtype="<i4").tolist()
    return tokens
