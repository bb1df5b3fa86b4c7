"""llama-server's --cache-ram: a sequence's KV cells kept in host memory when new work takes them.

A sequence's cells are a conversation's history; when another request takes the
sequence, the history would otherwise be evaluated again on its next turn. Before the
cells go, their state (`llama_state_seq_get_data`) is copied into memory, up to
LLM_CACHE_RAM_MB, the least recently used going first, with the sequence's context
checkpoints; a prompt that can resume a longer prefix from a kept state than from any
sequence gets it back (`llama_state_seq_set_data`) and evaluates only the rest. Copying a
state costs about a millisecond per 40 MB, far less than evaluating the tokens it holds.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from app.engine.checkpoints import Checkpoint
from app.engine.context import BatchContext
from app.engine.memory import Resumable
from app.engine.prefix_blocks import BLOCK, block_hashes, resumable_only
from app.engine.scheduling import common_prefix
from app.engine.sequence import Sequence

PUBLISHED = 16  # kept states whose prefixes routing hears of (the most recently used)


@dataclass(frozen=True)
class Kept:
    """One sequence's cells as they were: the tokens they held, llama.cpp's saved state, and where
    that state can be resumed (its live range and checkpoints, for memories that cannot be cut)."""

    tokens: tuple[int, ...]
    state: bytes
    blocks: tuple[int, ...]  # block hashes of `tokens`, to compare prefixes a block at a time
    live_from: int = 0
    checkpoints: tuple[Checkpoint, ...] = ()
    adapters: tuple[float, ...] = ()  # the LoRA scales the cells were evaluated with (): the base model

    @property
    def key(self) -> tuple[tuple[float, ...], tuple[int, ...]]:
        """Kept states are told apart by their scales, then their tokens."""
        return self.adapters, self.tokens

    @property
    def resumable(self) -> Resumable:
        return Resumable(len(self.tokens), self.live_from, tuple(c.position for c in self.checkpoints))

    @property
    def size(self) -> int:
        return len(self.state) + sum(len(c.state) for c in self.checkpoints)


class HostCache:
    """Saved sequence states, by the tokens they hold, within a memory limit (least recently used out)."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit = limit_bytes
        self.used = 0
        self.version = 0  # bumped whenever the kept states change (routing hears of them again)
        self._kept: OrderedDict[tuple[tuple[float, ...], tuple[int, ...]], Kept] = OrderedDict()
        self.restored_tokens = 0  # over the worker's life, for the metrics

    def save(self, model: BatchContext, sequence: Sequence) -> None:
        """Keep the state of `sequence` (its cells and checkpoints) before they are taken."""
        tokens, scales = tuple(sequence.cached), sequence.adapters
        alike = [k for k in self._kept.values() if k.adapters == scales]
        if len(tokens) < BLOCK or any(k.tokens[: len(tokens)] == tokens for k in alike):
            return  # too little to be worth it, or already kept (or within a longer kept state)
        memory = model.memory_kind
        pos_min = memory.saved_pos_min(len(tokens), model.pos_min(sequence.seq_id)) if memory.sliding else 0
        state = model.save_state(sequence.seq_id)
        live_from = memory.live_from(len(tokens), pos_min)
        blocks = tuple(block_hashes(tokens))
        kept = Kept(tokens, state, blocks, live_from, sequence.checkpoints.kept, scales)
        if kept.size > self.limit:
            return
        for shorter in [k.key for k in alike if tokens[: len(k.tokens)] == k.tokens]:  # prefixes of this one
            self._drop(shorter)
        while self.used + kept.size > self.limit:
            self._drop(next(iter(self._kept)))
        self._kept[kept.key] = kept
        self.used += kept.size
        self.version += 1

    def find(self, prompt: list[int], beat: int, adapters: tuple[float, ...] = ()) -> tuple[Kept, int] | None:
        """The kept state evaluated with `adapters` that resumes the longest prefix of `prompt` (leaving
        a token to evaluate), if that beats `beat` tokens by a block; with the length it resumes."""
        best: tuple[Kept, int] | None = None
        shared = beat
        blocks = block_hashes(prompt)
        for kept in self._kept.values():
            if kept.adapters != adapters:  # cells evaluated under other scales hold other values
                continue
            whole = common_prefix(kept.blocks, blocks) * BLOCK  # then the tokens after the last whole block
            tail = common_prefix(kept.tokens[whole : whole + BLOCK], prompt[whole : whole + BLOCK])
            length = kept.resumable.best(min(whole + tail, len(prompt) - 1))
            if length >= shared + BLOCK:
                best, shared = (kept, length), length
        return best

    def restore(self, model: BatchContext, sequence: Sequence, kept: Kept, point: int) -> int:
        """Give `sequence` a kept state and cut it to its first `point` tokens (a result of `find`);
        the prompt tokens its cells then hold (0: llama.cpp refused the state)."""
        sequence.drop_cache(model)
        try:
            model.load_state(sequence.seq_id, kept.state)
            if kept.resumable.from_checkpoint(point):
                (checkpoint,) = [c for c in kept.checkpoints if c.position == point]
                model.load_state(sequence.seq_id, checkpoint.state, partial=True)
        except RuntimeError:  # no room in the cache: evaluate the prompt instead
            sequence.drop_cache(model)
            if kept.key in self._kept:
                self._drop(kept.key)
            return 0
        if not model.forget(sequence.seq_id, point, -1):
            sequence.drop_cache(model)
            return 0
        sequence.cached = list(kept.tokens[:point])
        sequence.checkpoints.replace(tuple(c for c in kept.checkpoints if c.position <= point))
        sequence.adapters = kept.adapters
        if kept.key in self._kept:  # (saving the sequence's own cells may have pushed it out)
            self._kept.move_to_end(kept.key)
        self.restored_tokens += point
        return point

    def published(self) -> list[list[int]]:
        """Block hashes of the most recently used kept states, for routing (blocks they can resume);
        those of the base model only, as routing hears of tokens, not of LoRA scales."""
        plain = [kept for kept in self._kept.values() if not kept.adapters]
        recent = plain[-PUBLISHED:]
        rows = [resumable_only(kept.blocks, kept.resumable) for kept in recent]
        return rows + [[]] * (PUBLISHED - len(recent))

    def _drop(self, key: tuple[tuple[float, ...], tuple[int, ...]]) -> None:
        self.used -= self._kept.pop(key).size
        self.version += 1
