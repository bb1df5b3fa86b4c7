"""`GET /slots` and `POST /slots/{id}?action=save|restore|erase`: llama-server's slots, here sequences.

A slot is one of a worker's sequences; ids run on from one worker of the model to the next
(worker k's sequence s is slot k * LLM_PARALLEL + s), so with one worker they are
llama-server's. An action on another worker's slot is relayed to it. Saving and restoring
keep files in LLM_SLOT_SAVE_PATH, by names that cannot leave it (with API keys, in a folder of
each key's: keys/<name>/). A slot whose cells hold another tenant's prompt (cache_scope.py) is as
if empty to a request: listed with no tokens, saved empty, never erased by it.
"""

from __future__ import annotations

from flask import Blueprint, Response, request

from app.api.http.openapi import documented
from app.api.http.roles import operator_route
from app.api.routing.front import routed
from app.api.slots import openapi as doc
from app.api.slots import serving

bp = Blueprint("slots", __name__)


@bp.get("/slots")
@documented(doc.SLOTS)
@routed(source="query", wakes=False, loads=False)
def list_slots() -> Response:
    """Every worker's sequences of the model as llama-server's slots."""
    return serving.listed()


@bp.post("/slots/<int:id_slot>")
@operator_route
@documented(doc.ACTION)
@routed(source="query")
def slot_action(id_slot: int) -> Response:
    """Save a slot's cells to a file, restore them from one, or erase them (llama-server's answers)."""
    return serving.acted(id_slot, request.args.get("action", ""))
