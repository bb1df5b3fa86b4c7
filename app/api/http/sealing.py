"""Reasoning sealed for stateless clients: encrypted and signed with the server's key.

A client that keeps nothing on the server (Codex sends `store: false` with
`include: ["reasoning.encrypted_content"]`; Claude Code hands back thinking blocks it was
shown with `display: "omitted"`) carries the model's reasoning from one turn to the next
as an opaque blob. Sealed with Fernet (AES-CBC, then HMAC-SHA256), a blob is readable
only here and cannot be forged or altered: one that does not open is treated as no
reasoning at all, never as text to put in the prompt. The key is LLM_REASONING_KEY, else
one made once in LLM_DATA_DIR (shared by the workers, kept across restarts), and each API
key's blobs are sealed with a key of their own derived from it: a blob one tenant was shown
opens for no other tenant (who could otherwise replay it into its own prompt and read it).
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
from functools import cache
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from app.api.http import store_access
from app.settings.current import current_config

_KEY_FILE = "reasoning.key"
PREFIX = "llmsealed1:"  # ours, by this scheme; anything else is not a blob of this server


class Sealer:
    """Seals and opens one owner's blobs (made in the view: a stream's generator has no app context)."""

    def __init__(self, secret: str, owner: str = "") -> None:
        self._fernet = _fernet(secret, owner)

    def seal(self, text: str) -> str:
        """`text` as an opaque blob only this server (or one sharing its key) opens."""
        return PREFIX + self._fernet.encrypt(text.encode()).decode()

    def unseal(self, blob: str) -> str | None:
        """The text sealed in `blob`, or None if it is not one of ours, or was altered."""
        if not blob.startswith(PREFIX):
            return None
        try:
            return self._fernet.decrypt(blob[len(PREFIX) :].encode()).decode()
        except (InvalidToken, UnicodeDecodeError, ValueError):
            return None


def current() -> Sealer:
    """The sealer of the app serving this request, for its API key's blobs."""
    config = current_config()
    return Sealer(config.reasoning_key or _key_file(config.data_dir), store_access.owner())


@cache
def _fernet(secret: str, owner: str) -> Fernet:
    # The server's key alone without keys ("": as before); with them, one key per owner's name.
    material = secret if not owner else hashlib.sha256(f"{secret}\0{owner}".encode()).hexdigest()
    return Fernet(base64.urlsafe_b64encode(hashlib.sha256(material.encode()).digest()))


@cache
def _key_file(data_dir: str) -> str:
    """The key in `data_dir`, made by the first worker that needs it (the others read that one)."""
    path = Path(data_dir) / _KEY_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        # Private from its first byte: written, then made private, it was readable for a moment.
        partial.unlink(missing_ok=True)
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as opened:
            opened.write(secrets.token_urlsafe(32))
        try:
            os.link(partial, path)  # fails if another worker made it first: theirs is kept
        except FileExistsError:
            pass
        finally:
            partial.unlink()
    return path.read_text().strip()
