"""Slot files by key name: the folders named by a key's place before (`keys/key-N`, `keys/line-N`)
moved to the key's name now (a digest of the key), once, at start-up in the master.

As the store's revision 0006 does for stored objects, this reads the place from the keys configured
now, so it runs once (a marker in the folder says it has): after that no folder is named by place,
and a key removed later leaves its folder to no other key.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from app.settings.keys import ApiKey

log = logging.getLogger(__name__)
MARKER = ".named-by-digest"


def move_named_by_place(slot_save_path: str | None, keys: Iterable[ApiKey]) -> None:
    """Move each key's folder from its old name to its name, once per LLM_SLOT_SAVE_PATH."""
    folder = Path(slot_save_path or "") / "keys"
    if not slot_save_path or not folder.is_dir() or (folder / MARKER).exists():
        return
    try:
        for key in keys:
            old, new = folder / (key.legacy_name or ""), folder / key.name
            if key.legacy_name and old.is_dir() and not new.exists():
                old.rename(new)
                log.info(
                    "slot files of key %s moved from keys/%s to keys/%s", key.name, key.legacy_name, key.name
                )
        (folder / MARKER).touch()
    except OSError as failed:  # the folder read-only: the files stay where they are, each key's still
        log.warning("slot files' folders named by place were not moved (%s)", failed.strerror)
