"""`POST /sleep`, `POST /wake_up`, `GET /is_sleeping` (vLLM's), over every start-up worker.

Each start-up worker frees its model's weights and KV cache (`/sleep`; vLLM's levels 1 and
2 both mean that here: nothing is kept in host memory) or loads them again (`/wake_up`,
answered once every worker is ready). The order goes to each worker over the peers' sockets
as a relayed request, which acts on the worker itself. A worker serving requests stays
awake: the answer is then a 409 naming how many did. Idle sleep (LLM_SLEEP_IDLE) and
requests waking their model are app/serving/sleep.py and app/api/routing/waking.py.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.api.http.openapi import documented
from app.api.http.roles import operator_route
from app.api.routing import orders
from app.api.sleep import openapi as doc
from app.api.sleep import serving

bp = Blueprint("sleep", __name__)


@bp.post("/sleep")
@operator_route
@documented(doc.SLEEP)
def sleep() -> Response:
    """Put every start-up worker's model to sleep; a 409 if some serve requests (they stay awake)."""
    return serving.slept()


@bp.post("/wake_up")
@operator_route
@documented(doc.WAKE_UP)
def wake_up() -> Response:
    """Wake every start-up worker's model; answers once each is loaded and ready."""
    return serving.woken()


@bp.get("/is_sleeping")
@documented(doc.IS_SLEEPING)
def is_sleeping() -> Response:
    """Whether every start-up worker's model sleeps (vLLM's `{"is_sleeping": bool}`)."""
    startup = orders.startup_workers()
    return jsonify({"is_sleeping": bool(startup) and all(peer.asleep for peer in startup)})
