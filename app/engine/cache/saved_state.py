"""A sequence's cells kept apart from it (in host memory or on disk): what they hold and where they resume."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from app.engine.cache.prefix_blocks import BLOCK, block_hashes
from app.engine.checkpoints import Checkpoint
from app.engine.context import BatchContext
from app.engine.memory import Resumable
from app.engine.scheduling import common_prefix
from app.engine.sequence import Sequence


@dataclass(frozen=True)
class SavedState:
    """One sequence's cells as they were: the tokens they held, llama.cpp's saved state, and where
    that state can be resumed (its live range and checkpoints, for memories that cannot be cut)."""

    tokens: tuple[int, ...]
    state: bytes
    blocks: tuple[int, ...]  # block hashes of `tokens`, to compare prefixes a block at a time
    live_from: int = 0
    checkpoints: tuple[Checkpoint, ...] = ()
    adapters: tuple[float, ...] = ()  # the LoRA scales the cells were evaluated with (): the base model
    pinned_until: float = 0.0  # a client asked to keep it cached until then (time.monotonic())
    scope: str = ""  # whose prompt it holds: resumed by requests of this cache scope only

    @property
    def key(self) -> tuple[str, tuple[float, ...], tuple[int, ...]]:
        """Saved states are told apart by their scope and scales, then their tokens."""
        return self.scope, self.adapters, self.tokens

    @property
    def resumable(self) -> Resumable:
        return Resumable(len(self.tokens), self.live_from, tuple(c.position for c in self.checkpoints))

    @property
    def size(self) -> int:
        return len(self.state) + sum(len(c.state) for c in self.checkpoints)


def capture(model: BatchContext, sequence: Sequence) -> SavedState:
    """The state of `sequence`'s cells and checkpoints, copied out of llama.cpp."""
    tokens = tuple(sequence.cached)
    memory = model.memory_kind
    pos_min = memory.saved_pos_min(len(tokens), model.pos_min(sequence.seq_id)) if memory.sliding else 0
    state = model.save_state(sequence.seq_id)
    live_from = memory.live_from(len(tokens), pos_min)
    blocks = tuple(block_hashes(tokens, sequence.scope))
    length, until = sequence.pinned
    pinned_until = until if len(tokens) >= length else 0.0
    checkpoints, scales = sequence.checkpoints.held, sequence.adapters
    return SavedState(tokens, state, blocks, live_from, checkpoints, scales, pinned_until, sequence.scope)


class Held(Protocol):
    """Tokens held somewhere, told apart by block hashes, resumable at some of their prefixes."""

    @property
    def tokens(self) -> tuple[int, ...]: ...
    @property
    def blocks(self) -> tuple[int, ...]: ...
    @property
    def resumable(self) -> Resumable: ...


H = TypeVar("H", bound=Held)


def longest(candidates: Iterable[H], prompt: list[int], beat: int, scope: str) -> tuple[H, int] | None:
    """The candidate that resumes the longest prefix of `prompt` (leaving a token to evaluate), if
    that beats `beat` tokens by a block, or by an image or audio clip (whose encoding a restore saves
    too); with the length it resumes. The candidates are those of the prompt's cache `scope`, whose
    block hashes begin from it."""
    best: tuple[H, int] | None = None
    shared = beat
    blocks = block_hashes(prompt, scope)
    for held in candidates:
        whole = common_prefix(held.blocks, blocks) * BLOCK  # then the tokens after the last whole block
        tail = common_prefix(held.tokens[whole : whole + BLOCK], prompt[whole : whole + BLOCK])
        length = held.resumable.best(min(whole + tail, len(prompt) - 1))
        if length >= shared + BLOCK or (length > shared and holds_media(prompt[shared:length])):
            best, shared = (held, length), length
    return best


def holds_media(tokens: Iterable[int]) -> bool:
    """Whether these prompt positions hold part of an image or audio clip (media.py's negative ids)."""
    return any(token < 0 for token in tokens)
