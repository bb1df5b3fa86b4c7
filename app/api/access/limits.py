"""Per-key limits at the door: a request over its key's limit is a 429 with OpenAI's rate-limit headers."""

from __future__ import annotations

from flask import Flask, Response, current_app, g, request

from app import workers
from app.api.http.errors import KeyLimitError
from app.serving import detached, internal, relay
from app.serving.key_limits import KeyLimits
from app.settings.keys import ApiKey


def _worker_seat() -> int:
    me = workers.this_worker()
    return me.seat if me is not None else 0


def _limited_key() -> ApiKey | None:
    key: ApiKey | None = g.get("api_key")
    return key if key is not None and key.limited else None


def _admit() -> None:
    key = _limited_key()
    # Work is counted, on every route that takes it (a POST: llama-server's and Ollama's
    # routes as much as /v1), not reading (listing models); a request relayed from another
    # worker was counted there.
    if key is None or request.method != "POST" or relay.is_relayed(request, workers.this_worker()):
        return
    limits: KeyLimits = current_app.extensions["key_limits"]
    verdict = limits.admit(_worker_seat(), key)
    g.limit_headers = verdict.headers
    if not verdict.allowed:
        raise KeyLimitError(
            f"Rate limit reached for the key '{key.name}': {verdict.reason}. "
            f"Please try again in {verdict.retry_after}s.",
            verdict.headers,
        )
    g.limit_held = True


def _attach(response: Response) -> Response:
    key = _limited_key()
    if key is None:
        return response
    response.headers.update(g.pop("limit_headers", {}))
    limits: KeyLimits = current_app.extensions["key_limits"]
    held, stats, worker = g.pop("limit_held", False), g.stats, _worker_seat()
    batch_line = internal.of(request.environ) is not None  # a batch's tokens are not the key's live budget

    def settle(tokens: int) -> None:
        if held:
            limits.release(worker, key)
        if key.tpm is not None and not stats.relayed and not batch_line:  # the worker that generated counts
            limits.count_tokens(key, tokens)

    apart: detached.Handoff | None = g.get("handoff")

    def ended() -> None:  # after the last byte of a stream, or when its client hung up
        if apart is not None:
            apart.on_end(settle)  # a background run: settled when it ends, not with its POST
        else:
            settle(stats.prompt_tokens + stats.completion_tokens)

    response.call_on_close(ended)
    return response


def _never_answered(_: BaseException | None) -> None:
    key = _limited_key()
    if key is not None and g.pop("limit_held", False):  # no response went out to release it
        current_app.extensions["key_limits"].release(_worker_seat(), key)


def init_app(app: Flask) -> None:
    """Check limits after the key is known; count until each response has ended."""
    state = workers.of(app)  # under gunicorn, the counts every worker shares; one process: its own
    app.extensions["key_limits"] = state.shared.limits if state is not None else KeyLimits(workers=1)
    app.before_request(_admit)
    app.after_request(_attach)
    app.teardown_request(_never_answered)
