"""llama-server's --cache-ram: a sequence's KV cells kept in host memory when new work takes them.

A sequence's cells are a conversation's history; when another request takes the
sequence, the history would otherwise be evaluated again on its next turn. Before the
cells go, their state (`llama_state_seq_get_data`) is copied into memory, up to
LLM_CACHE_RAM_MB, the least recently used going first; a prompt that shares a longer
prefix with a kept state than with any sequence gets it back (`llama_state_seq_set_data`)
and evaluates only the rest. Copying a state costs about a millisecond per 40 MB, far
less than evaluating the tokens it holds.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from app.engine.context import BatchContext
from app.engine.prefix_blocks import BLOCK, block_hashes
from app.engine.scheduling import common_prefix

PUBLISHED = 16  # kept states whose prefixes routing hears of (the most recently used)


@dataclass(frozen=True)
class Kept:
    """One sequence's cells as they were: the tokens they held and llama.cpp's saved state."""

    tokens: tuple[int, ...]
    state: bytes
    blocks: tuple[int, ...]  # block hashes of `tokens`, to compare prefixes a block at a time


class HostCache:
    """Saved sequence states, by the tokens they hold, within a memory limit (least recently used out)."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit = limit_bytes
        self.used = 0
        self.version = 0  # bumped whenever the kept states change (routing hears of them again)
        self._kept: OrderedDict[tuple[int, ...], Kept] = OrderedDict()
        self.restored_tokens = 0  # over the worker's life, for the metrics

    def swap(
        self, model: BatchContext, seq_id: int, held: list[int], prompt: list[int], reusable: int
    ) -> int:
        """A new prompt takes sequence `seq_id`, whose cells hold `held` and share `reusable` tokens
        with it: keep the cells it would lose (a block or more), and give it back a kept state
        that shares more of the prompt; the prompt tokens its cells then hold."""
        if len(held) - reusable >= BLOCK:
            self.save(model, seq_id, held)
        return self.restore(model, seq_id, prompt, reusable)

    def save(self, model: BatchContext, seq_id: int, tokens: list[int]) -> None:
        """Keep the state of `seq_id`, whose cells hold `tokens`, before they are taken."""
        key = tuple(tokens)
        if len(key) < BLOCK or key in self._kept or any(k[: len(key)] == key for k in self._kept):
            return  # too little to be worth it, or already kept (or within a longer kept state)
        state = model.save_state(seq_id)
        if len(state) > self.limit:
            return
        for longer_gone in [k for k in self._kept if key[: len(k)] == k]:  # a prefix of this one
            self._drop(longer_gone)
        while self.used + len(state) > self.limit:
            self._drop(next(iter(self._kept)))
        self._kept[key] = Kept(key, state, tuple(block_hashes(key)))
        self.used += len(state)
        self.version += 1

    def restore(self, model: BatchContext, seq_id: int, prompt: list[int], reusable: int) -> int:
        """Give `seq_id` the kept state sharing the longest prefix with `prompt`, if it beats `reusable`
        tokens by a block; the prompt tokens it then holds (else `reusable`)."""
        best, shared = None, reusable
        blocks = block_hashes(prompt)
        for kept in self._kept.values():
            whole = common_prefix(kept.blocks, blocks) * BLOCK  # then the tokens after the last whole block
            tail = common_prefix(kept.tokens[whole : whole + BLOCK], prompt[whole : whole + BLOCK])
            length = min(whole + tail, len(prompt) - 1)
            if length >= shared + BLOCK:
                best, shared = kept, length
        if best is None:
            return reusable
        model.forget(seq_id, 0, -1)
        try:
            model.load_state(seq_id, best.state)
        except RuntimeError:  # llama.cpp refused it (no room in the cache): evaluate the prompt instead
            model.forget(seq_id, 0, -1)
            self._drop(best.tokens)
            return 0
        model.forget(seq_id, shared, -1)
        self._kept.move_to_end(best.tokens)
        self.restored_tokens += shared
        return shared

    def published(self) -> list[list[int]]:
        """Block hashes of the most recently used kept states, for routing."""
        recent = list(self._kept)[-PUBLISHED:]
        return [list(self._kept[tokens].blocks) for tokens in recent] + [[]] * (PUBLISHED - len(recent))

    def _drop(self, key: tuple[int, ...]) -> None:
        self.used -= len(self._kept.pop(key).state)
        self.version += 1
