"""The engine's own failures: what went wrong, with no HTTP status (the API layer maps them)."""

from __future__ import annotations


class EngineError(Exception):
    """Base of every error the engine raises on purpose; the message is safe to show a client."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class QueueFullError(EngineError):
    """The worker already holds as many requests as LLM_MAX_QUEUE allows."""


class QueueTimeoutError(EngineError):
    """The request waited for the model longer than LLM_QUEUE_TIMEOUT."""


class KVCacheFullError(EngineError):
    """The KV cache the sequences share had no room left for this one (LLM_KV_SIZE over-committed)."""


class PromptRejectedError(EngineError):
    """The model's chat template refused the messages."""


class GrammarError(EngineError):
    """A JSON schema or grammar the engine cannot enforce."""
