"""What both answer formats do with each chunk: note its figures, and turn a failure into a 500."""

from __future__ import annotations

import logging

from app.api.errors import ServerError
from app.engine.errors import KVCacheFullError
from app.engine.types import Chunk
from app.telemetry.request_stats import RequestStats

log = logging.getLogger("app.api.respond")


def account(chunk: Chunk, stats: RequestStats) -> None:
    """Note when text came and how many tokens each choice has, for the access log and metrics."""
    if chunk.text:
        stats.on_text()
    stats.count_tokens(chunk.index, chunk.completion_tokens)


def raise_if_failed(chunk: Chunk) -> None:
    """Log a generation's failure and turn it into a 500 that tells the client no internals."""
    if chunk.error:
        log.error("generation failed:\n%s", chunk.error)
        raise ServerError("The server had an error while generating; please retry.")
    if chunk.finish_reason == "kv_full":
        raise KVCacheFullError(
            "The server's KV cache filled up while generating this answer (LLM_KV_SIZE); retry shortly."
        )
