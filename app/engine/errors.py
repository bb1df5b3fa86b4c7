"""The engine's own failures: what went wrong, with no HTTP status (the API layer maps them)."""

from __future__ import annotations

import re

# An absolute path on the server (not a URL's: no scheme's "//" or word before it), its last part kept.
_PATH = re.compile(r"(?<![\w.:/~-])/(?:[^\s'\"(),;:/]+/)+([^\s'\"(),;:/]*)")


def without_paths(message: str) -> str:
    """`message` as a client may read it: each absolute path on the server cut to its file's name
    (where the operator keeps models, adapters and data is not a client's to know). For messages
    about files (a load's error): an API route written in a message would be cut too."""
    return _PATH.sub(lambda found: found.group(1) or "(a folder)", message)


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
