"""llama-server's slots served: this worker's sequences listed with every other worker's, and an
action on one of them (saved to, restored from, a file of LLM_SLOT_SAVE_PATH; or erased), here
or by the worker that holds it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flask import Response, jsonify

from app.api.http import cache_scope, store_access
from app.api.http.body import generating_engine, parse_body
from app.api.http.errors import InvalidRequestError, NotSupportedError, ServerError
from app.api.routing import ranked
from app.api.slots.schemas import slot_file_schema, valid_filename
from app.engine.cache.slot_files import SlotFileError, SlotRefusedError
from app.settings.current import current_config

ACTIONS = ("save", "restore", "erase")


def listed() -> Response:
    """Every worker's sequences of the model as llama-server's slots: id, context, busy or not,
    tokens cached (this worker's, then each other's, asked over the relay)."""
    engine, config = generating_engine(), current_config()
    first = ranked.rank() * config.parallel
    rows = [
        {"id": first + seq_id, "n_ctx": config.n_ctx, "speculative": config.spec_type != "none",
         "is_processing": busy, "n_prompt_tokens": cached}
        for seq_id, busy, cached in engine.slots(cache_scope.request_scope(None))
    ]  # fmt: skip
    for answer in ranked.others():  # each other worker's own slots
        rows += answer.get_json() if answer.status_code == 200 else []
    return jsonify(sorted(rows, key=lambda row: row["id"]))


def acted(id_slot: int, action: str) -> Response:
    """Save a slot's cells to a file, restore them from one, or erase them (llama-server's answers)."""
    config = current_config()
    if not config.slot_save_path:
        raise NotSupportedError("This server does not support slots action. Set LLM_SLOT_SAVE_PATH.")
    if action not in ACTIONS:
        raise InvalidRequestError("Invalid action: save, restore or erase.", param="action")
    place, seq_id = divmod(id_slot, config.parallel)
    if place != ranked.rank():  # another worker's sequence: its answer
        answer = ranked.at(place)
        if answer is None:
            raise InvalidRequestError("Invalid slot ID", param="id_slot")
        return answer
    filename = None
    if action != "erase":
        filename = parse_body(slot_file_schema)["filename"]
        if not valid_filename(filename):
            raise InvalidRequestError("Invalid filename", param="filename")
    path = None if filename is None else _folder(config.slot_save_path) / filename
    outcome = generating_engine().slot_action(action, seq_id, path, cache_scope.request_scope(None)).get()
    if isinstance(outcome, SlotRefusedError):
        raise InvalidRequestError(f"Unable to {action} slot: {outcome}")
    if isinstance(outcome, SlotFileError):
        if action == "save":
            raise ServerError(f"Unable to save slot: {outcome}")  # the disk, or llama.cpp, failed
        raise InvalidRequestError(f"Unable to {action} slot: {outcome}", param="filename")
    named: dict[str, Any] = {} if filename is None else {"filename": filename}
    return jsonify({"id_slot": id_slot, **named, **outcome})


def _folder(root: str) -> Path:
    """Where this request's key keeps its slot files: a folder of its own when the server has keys,
    so that no key reads, overwrites or learns of another's files."""
    owner = store_access.owner()
    if not owner:
        return Path(root)
    folder = Path(root) / "keys" / owner
    folder.mkdir(parents=True, exist_ok=True)
    return folder
