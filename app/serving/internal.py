"""Requests a worker makes of its own app (batch lines): marked in the WSGI environ, where no client reaches.

A client's headers arrive in the environ only as HTTP_* keys, so the marker cannot be
forged. A marked request runs here at low priority, as its key's owner, past the door's
limits (a batch is bounded by its runner) and never relayed (its runner chose this worker).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.settings.keys import ApiKey

ENVIRON_KEY = "llm.internal_call"


@dataclass
class InternalCall:
    """One batch line's request: whose it is, and the generations it started (to see them preempted)."""

    key: ApiKey | None  # None without keys
    generations: list[Any] = field(default_factory=list)

    @property
    def preempted(self) -> bool:
        """The engine took a sequence back from it for an interactive request: run it again later."""
        return any(getattr(generation, "preempted", False) for generation in self.generations)

    def cancel(self) -> None:
        for generation in self.generations:
            generation.cancel()


def of(environ: dict[str, Any]) -> InternalCall | None:
    """The internal call a request's environ carries; None for every request from a client."""
    call = environ.get(ENVIRON_KEY)
    return call if isinstance(call, InternalCall) else None
