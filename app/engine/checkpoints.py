"""Context checkpoints: what of a sequence's memory cannot be cut back, saved at points of its prompt.

As llama-server's --ctx-checkpoints (tools/server/server-context.cpp, `create_checkpoint`):
while a prompt is evaluated, the sliding-window cells or the recurrent state of its
sequence are copied out (`llama_state_seq_get_data_ext` with LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY)
at positions a later prompt is likely to share: just before the prompt's end, and a
micro-batch before that. A later prompt whose shared prefix ends where the live cells
cannot be cut restores the newest checkpoint at or before it, cuts the full-attention
cells there, and evaluates from that position on. Each sequence keeps a few, oldest out.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Checkpoint:
    """A sequence's partial state after its first `position` tokens."""

    position: int
    state: bytes


class Checkpoints:
    """One sequence's checkpoints, by position, at most `limit` (the oldest go first)."""

    def __init__(self, limit: int, held: tuple[Checkpoint, ...] = ()) -> None:
        self.limit = limit
        self._held = list(held)

    @property
    def positions(self) -> tuple[int, ...]:
        return tuple(c.position for c in self._held)

    @property
    def held(self) -> tuple[Checkpoint, ...]:
        return tuple(self._held)

    @property
    def bytes(self) -> int:
        return sum(len(c.state) for c in self._held)

    def add(self, checkpoint: Checkpoint) -> None:
        """Keep a new checkpoint (replacing one at the same position), dropping the oldest past the limit."""
        if self.limit <= 0:
            return
        self._held = [c for c in self._held if c.position != checkpoint.position] + [checkpoint]
        self._held.sort(key=lambda c: c.position)
        while len(self._held) > self.limit:
            self._held.pop(0)

    def at(self, position: int) -> Checkpoint:
        """The checkpoint taken at `position` (one of `positions`)."""
        (found,) = [c for c in self._held if c.position == position]
        return found

    def keep_until(self, position: int) -> None:
        """Drop the checkpoints past `position`: the cells after it are about to hold other tokens."""
        self._held = [c for c in self._held if c.position <= position]

    def replace(self, held: tuple[Checkpoint, ...]) -> None:
        """Take another sequence's checkpoints (the cells they belong to were copied or restored)."""
        self._held = list(held)[-self.limit :] if self.limit > 0 else []

    def clear(self) -> None:
        self._held = []
