"""llama-server's slot actions (save, restore, erase a sequence's cells), done by the batcher between steps.

A sequence that holds a choice is not touched: the action waits until the choice is done,
as llama-server defers it. The result (llama-server's answer fields) or the reason it
failed goes to `done`, from the batcher's thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.cache import slot_files
from app.engine.cache.slot_files import SlotFile, SlotFileError, SlotRefusedError
from app.engine.context import BatchContext
from app.engine.sequence import Sequence

Outcome = dict[str, Any] | SlotFileError
log = logging.getLogger("app.engine.batcher")


@dataclass(eq=False)
class SlotAction:
    """`action` ("save", "restore" or "erase") on sequence `seq_id`, with the slot file at `path`."""

    action: str
    seq_id: int
    path: Path | None
    fingerprint: str
    done: Callable[[Outcome], None]
    scope: str = ""  # the asking request's cache scope: another scope's cells are as if empty to it


def run_due(waiting: list[SlotAction], sequences: list[Sequence], model: BatchContext) -> list[SlotAction]:
    """Do the actions whose sequence is idle; those that must still wait."""
    left = []
    for action in waiting:
        if not 0 <= action.seq_id < len(sequences):
            action.done(SlotFileError("Invalid slot ID"))
        elif sequences[action.seq_id].busy:
            left.append(action)
        else:
            action.done(_outcome(action, sequences[action.seq_id], model))
    return left


def _outcome(action: SlotAction, sequence: Sequence, model: BatchContext) -> Outcome:
    started = time.monotonic()
    try:
        if action.action == "erase":
            if sequence.scope != action.scope:  # not its to erase, nor to know of
                return {"n_erased": 0}
            erased = len(sequence.cached)
            sequence.drop_cache(model)
            return {"n_erased": erased}
        if action.path is None:
            return SlotFileError("a file name is needed")
        if action.action == "save":
            return _save(action, action.path, sequence, model) | _timing("save_ms", started)
        return _restore(action, action.path, sequence, model) | _timing("restore_ms", started)
    except SlotFileError as failed:
        return failed
    except OSError as failed:  # the folder is gone, full or read-only: the operator's to see
        return SlotFileError(f"the slot file could not be written or read ({failed.strerror})")
    except Exception:  # noqa: BLE001 - an action must neither fail the step's choices nor go unanswered
        log.exception("slot %s of sequence %d failed", action.action, action.seq_id)
        sequence.drop_cache(model)  # whatever it held may be half written: evaluated again when asked
        return SlotFileError("it failed in llama.cpp (see the server log)")


def _save(action: SlotAction, path: Path, sequence: Sequence, model: BatchContext) -> dict[str, Any]:
    if sequence.scope != action.scope:  # another tenant's prompt: saved as an empty slot is
        saved = SlotFile([], b"", scope=action.scope)
    elif sequence.adapters:
        raise SlotRefusedError("its cells were evaluated with LoRA scales, which a slot file does not keep")
    else:
        saved = SlotFile(list(sequence.cached), model.save_state(sequence.seq_id), scope=sequence.scope)
    written = slot_files.write(path, action.fingerprint, saved)
    return {"n_saved": len(saved.tokens), "n_written": written}


def _restore(action: SlotAction, path: Path, sequence: Sequence, model: BatchContext) -> dict[str, Any]:
    if sequence.cached and sequence.scope != action.scope:
        # Another scope's cells are not the asking key's to drop (nor, by a refusal worded
        # otherwise than an empty slot's, to learn of: the file is not even read first).
        raise SlotRefusedError("the slot holds cells this key may not replace")
    saved, read = slot_files.read(path, action.fingerprint)
    sequence.drop_cache(model)
    sequence.scope = saved.scope  # (the file is its owner's: slot routes keep each key's apart)
    if not saved.tokens:
        return {"n_restored": 0, "n_read": read}
    try:
        model.load_state(sequence.seq_id, saved.state)
    except RuntimeError:
        sequence.drop_cache(model)
        raise SlotFileError("No available space in KV cache for it") from None
    sequence.cached, sequence.adapters = list(saved.tokens), ()
    return {"n_restored": len(saved.tokens), "n_read": read}


def _timing(name: str, started: float) -> dict[str, Any]:
    return {"timings": {name: round((time.monotonic() - started) * 1000, 3)}}
