"""A sequence's KV state in a file (llama-server's slot save and restore), verified before it is used.

The file holds what the sequence's cells hold (the tokens, then llama.cpp's state of them),
after a header that says which model and settings made it (the engine's fingerprint: the
llama.cpp build, the model file, the KV layout) and the SHA-256 of the rest. A file from
another model, other settings, or cut short or altered, is refused with the reason; it is
never loaded into a context. Files are written whole or not at all (a temporary file, then
renamed over the name).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAGIC = b"LLMSLOT1\n"
MAX_HEADER = 4096


class SlotFileError(Exception):
    """A slot file that cannot be used here; the message says why."""


@dataclass(frozen=True)
class SlotFile:
    """A sequence's tokens and llama.cpp's saved state of its cells."""

    tokens: list[int]
    state: bytes


def write(path: Path, fingerprint: str, saved: SlotFile) -> int:
    """Write `saved` to `path` (whole or not at all); the bytes written."""
    tokens = np.asarray(saved.tokens, dtype="<i4").tobytes()
    digest = hashlib.sha256(tokens + saved.state).hexdigest()
    header = {
        "fingerprint": fingerprint,
        "tokens": len(saved.tokens),
        "state": len(saved.state),
        "sha256": digest,
    }
    body = MAGIC + json.dumps(header).encode() + b"\n" + tokens + saved.state
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    with partial.open("wb") as out:
        out.write(body)
        out.flush()
        os.fsync(out.fileno())
    partial.replace(path)
    return len(body)


def read(path: Path, fingerprint: str) -> tuple[SlotFile, int]:
    """The slot file at `path` if this model and these settings made it and it is whole; its size."""
    try:
        body = path.read_bytes()
    except FileNotFoundError:
        raise SlotFileError("no such slot file") from None
    if not body.startswith(MAGIC):
        raise SlotFileError("not a slot file of this server")
    end = body.find(b"\n", len(MAGIC), len(MAGIC) + MAX_HEADER)
    try:
        header = json.loads(body[len(MAGIC) : end]) if end > 0 else None
    except ValueError:
        header = None
    if not isinstance(header, dict):
        raise SlotFileError("its header is unreadable")
    if header.get("fingerprint") != fingerprint:
        raise SlotFileError("it was saved by another model, llama.cpp build or KV settings")
    rest = body[end + 1 :]
    n_tokens, n_state = header.get("tokens"), header.get("state")
    if not isinstance(n_tokens, int) or not isinstance(n_state, int) or len(rest) != 4 * n_tokens + n_state:
        raise SlotFileError("it is cut short or has bytes too many")
    if hashlib.sha256(rest).hexdigest() != header.get("sha256"):
        raise SlotFileError("its contents do not match their checksum")
    tokens = np.frombuffer(rest[: 4 * n_tokens], dtype="<i4").tolist()
    return SlotFile(tokens, rest[4 * n_tokens :]), len(body)
