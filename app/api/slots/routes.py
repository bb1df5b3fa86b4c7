"""`GET /slots` and `POST /slots/{id}?action=save|restore|erase`: llama-server's slots, here sequences.

A slot is one of a worker's sequences; ids run on from one worker of the model to the next
(worker k's sequence s is slot k * LLM_PARALLEL + s), so with one worker they are
llama-server's. An action on another worker's slot is relayed to it. Saving and restoring
keep files in LLM_SLOT_SAVE_PATH, by names that cannot leave it (with API keys, in a folder of
each key's: keys/<name>/). A slot whose cells hold another tenant's prompt (cache_scope.py) is as
if empty to a request: listed with no tokens, saved empty, never erased by it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flask import Blueprint, Response, jsonify, request

from app.api.http import cache_scope, store_access
from app.api.http.body import generating_engine, parse_body
from app.api.http.errors import InvalidRequestError, NotSupportedError, ServerError
from app.api.http.openapi import documented
from app.api.routing import ranked
from app.api.routing.front import routed
from app.api.slots import openapi as doc
from app.api.slots.schemas import slot_file_schema, valid_filename
from app.engine.cache.slot_files import SlotFileError, SlotRefusedError
from app.settings.current import current_config

bp = Blueprint("slots", __name__)
ACTIONS = ("save", "restore", "erase")


@bp.get("/slots")
@documented(doc.SLOTS)
@routed(source="query", wakes=False)
def list_slots() -> Response:
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


@bp.post("/slots/<int:id_slot>")
@documented(doc.ACTION)
@routed(source="query")
def slot_action(id_slot: int) -> Response:
    """Save a slot's cells to a file, restore them from one, or erase them (llama-server's answers)."""
    config = current_config()
    if not config.slot_save_path:
        raise NotSupportedError("This server does not support slots action. Set LLM_SLOT_SAVE_PATH.")
    action = request.args.get("action", "")
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
