"""The slots family in the OpenAPI document: llama-server's GET /slots and POST /slots/{id}."""

from __future__ import annotations

from app.api.http.openapi import Component, json_doc, operation
from app.api.slots.schemas import SlotFileSchema

_INT, _BOOL, _STR = {"type": "integer"}, {"type": "boolean"}, {"type": "string"}
_SLOT = {
    "type": "object",
    "required": ["id", "n_ctx", "is_processing"],
    "properties": {
        "id": _INT,
        "n_ctx": _INT,
        "speculative": _BOOL,
        "is_processing": _BOOL,
        "n_prompt_tokens": _INT,
    },
}
_RESULT = {
    "type": "object",
    "required": ["id_slot"],
    "properties": {
        "id_slot": _INT, "filename": _STR, "n_saved": _INT, "n_written": _INT, "n_restored": _INT,
        "n_read": _INT, "n_erased": _INT, "timings": {"type": "object"},
    },
}  # fmt: skip
_ACTION = {
    "name": "action",
    "in": "query",
    "required": True,
    "schema": {"type": "string", "enum": ["save", "restore", "erase"]},
}
_ID = {"name": "id_slot", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 0}}


COMPONENTS: dict[str, Component] = {
    "Slots": {"type": "array", "items": _SLOT},
    "SlotFile": SlotFileSchema,
    "SlotActionResult": _RESULT,
}


SLOTS = operation(
    "The sequences of the worker that answers, as llama-server's slots",
    json_doc("The slots.", "Slots"),
    (401, 503),
)
ACTION = operation(
    "Save a slot's KV cells to a file, restore them from one, or erase them",
    json_doc("What was saved, restored or erased.", "SlotActionResult"),
    (400, 401, 500, 501, 503),
    body={"content": {"application/json": {"schema": "SlotFile"}}, "required": False},
    parameters=[_ID, _ACTION],
)
