"""vLLM's sleep orders served over every start-up worker: the order acted on here and sent to each
other worker; a relayed order acts on this worker alone."""

from __future__ import annotations

from collections.abc import Callable

from flask import Response, jsonify, request

from app.api.http.errors import InvalidRequestError, ModelBusyError, ServiceUnavailableError
from app.api.routing import orders, waking
from app.serving.sleep import Sleeper
from app.settings.current import current_config

LEVELS = ("1", "2")  # vLLM's: 1 keeps weights in host memory, 2 discards them; here both free all


def slept() -> Response:
    """Put every start-up worker's model to sleep; a 409 if some serve requests (they stay awake)."""
    level = request.args.get("level", "1")
    if level not in LEVELS:
        raise InvalidRequestError(f"level must be 1 or 2, not {level!r}.", param="level")
    if orders.relayed():
        if not _mine().sleep("request"):
            raise ModelBusyError("This worker's model serves requests.")
        return jsonify({"success": True})
    busy = orders.each(orders.startup_workers(), "/sleep", {}, _here(lambda mine: mine.sleep("request")))
    if busy:
        raise ModelBusyError(f"{len(busy)} worker(s) serve requests and stay awake; the others sleep.")
    return jsonify({"success": True})


def woken() -> Response:
    """Wake every start-up worker's model; answers once each is loaded and ready."""
    if orders.relayed():
        if not _wake(_mine()):
            raise ServiceUnavailableError("This worker's model did not load again; see the server log.")
        return jsonify({"success": True})
    failed = orders.each(orders.startup_workers(), "/wake_up", {}, _here(_wake))
    if failed:
        raise ServiceUnavailableError(
            f"{len(failed)} worker(s) did not load their model again (see the log)."
        )
    return jsonify({"success": True})


def _wake(mine: Sleeper) -> bool:
    mine.wake()
    return mine.engine.wait_ready(current_config().timeout)


def _here(act: Callable[[Sleeper], bool]) -> Callable[[], bool]:
    """`act` on this worker's sleeper, if it has one (a pool worker's models unload by themselves)."""

    def here() -> bool:
        mine = waking.sleeper()
        return mine is None or act(mine)

    return here


def _mine() -> Sleeper:
    mine = waking.sleeper()
    if mine is None:  # a pool worker: its models unload by themselves
        raise InvalidRequestError("This worker loads models on demand; they unload, not sleep.")
    return mine
