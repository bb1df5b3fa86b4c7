"""While the instance drains (SIGTERM), new work is a 503 and every connection closes after its answer."""

from __future__ import annotations

from flask import Flask, Response, request

from app import workers
from app.api.http.errors import ServiceUnavailableError
from app.serving import relay


def _draining() -> bool:
    state = workers.current()
    return state is not None and state.draining


# Reads answer while draining; so do cancellations, which end work sooner. Every other method, on
# every route (any family's, llama-server's, the store's, sleep, models, tools), may start work.
_READS = ("GET", "HEAD", "OPTIONS")


def starts_work(method: str, path: str) -> bool:
    """Whether a request may start work, and is refused while the instance drains."""
    return method not in _READS and not path.endswith("/cancel")


def _refuse_new_work() -> None:
    # A request relayed by a peer was admitted before the drain began; it runs.
    if _draining() and starts_work(request.method, request.path):
        if not relay.is_relayed(request, workers.this_worker()):
            raise ServiceUnavailableError("The server is shutting down; retry, another instance will answer.")


def _close_after(response: Response) -> Response:
    # So that clients and proxies take their next request elsewhere rather than keep a
    # connection to an instance about to go (a 503's retry included).
    if _draining():
        response.headers["Connection"] = "close"
    return response


def init_app(app: Flask) -> None:
    """Refuse new work while draining (before keys: a key's limit is not spent on a refusal)."""
    app.before_request(_refuse_new_work)
    app.after_request(_close_after)
