"""llama-server's --cache-ram: a sequence's KV cells kept in host memory when new work takes them.

A sequence's cells are a conversation's history; when another request takes the
sequence, the history would otherwise be evaluated again on its next turn. Before the
cells go, their state (`llama_state_seq_get_data`) is copied into memory, up to
LLM_CACHE_RAM_MB, the least recently used going first, with the sequence's context
checkpoints; a prompt that can resume a longer prefix from a saved state than from any
sequence gets it back (`llama_state_seq_set_data`) and evaluates only the rest. Copying a
state costs about a millisecond per 40 MB, far less than evaluating the tokens it holds.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import replace

from app.engine.cache.disk_cache import DiskCache
from app.engine.cache.prefix_blocks import BLOCK, resumable_only
from app.engine.cache.saved_state import SavedState, capture, holds_media, longest
from app.engine.context import BatchContext
from app.engine.sequence import Sequence

PUBLISHED = 16  # saved states whose prefixes routing hears of (the most recently used)


class HostCache:
    """Saved sequence states, by the tokens they hold, within a memory limit (least recently used out)."""

    def __init__(self, limit_bytes: int, disk: DiskCache | None = None) -> None:
        self.limit = limit_bytes
        self.disk = disk  # where evicted states go, and are found again (LLM_CACHE_DISK_MB)
        self.used = 0
        self.version = 0  # bumped whenever the saved states change (routing hears of them again)
        self._saved: OrderedDict[tuple[str, tuple[float, ...], tuple[int, ...]], SavedState] = OrderedDict()
        self.restored_tokens = 0  # over the worker's life, for the metrics

    def save(self, model: BatchContext, sequence: Sequence) -> None:
        """Keep the state of `sequence` (its cells and checkpoints) before they are taken."""
        tokens, scales = tuple(sequence.cached), sequence.adapters
        alike = [k for k in self._saved.values() if (k.adapters, k.scope) == (scales, sequence.scope)]
        if (len(tokens) < BLOCK and not holds_media(tokens)) or any(
            k.tokens[: len(tokens)] == tokens for k in alike
        ):
            return  # too little to be worth it (an image is, however short), or already kept
        saved = capture(model, sequence)
        if saved.size > self.limit:
            if self.disk is not None:
                self.disk.put(saved)
            return
        for shorter in [k for k in alike if tokens[: len(k.tokens)] == k.tokens]:  # prefixes of this one
            self._drop(shorter.key)
            if shorter.pinned_until > saved.pinned_until:  # what was asked to stay, stays
                saved = replace(saved, pinned_until=shorter.pinned_until)
        while self.used + saved.size > self.limit:
            victim = self._victim(saved)
            if victim is None:  # all that is kept was asked to stay: this one goes (to disk) instead
                if self.disk is not None:
                    self.disk.put(saved)
                return
            evicted = self._drop(victim)
            if self.disk is not None:
                self.disk.put(evicted)
        self._saved[saved.key] = saved
        self.used += saved.size
        self.version += 1

    def find(
        self, prompt: list[int], beat: int, adapters: tuple[float, ...] = (), scope: str = ""
    ) -> tuple[SavedState, int] | None:
        """The saved state evaluated with `adapters`, of cache `scope`, that resumes the longest prefix
        of `prompt` (leaving a token to evaluate), if that beats `beat` tokens by a block; with the
        length it resumes. In memory first, then on disk if a file there resumes more."""
        alike = (k for k in self._saved.values() if (k.adapters, k.scope) == (adapters, scope))
        found = longest(alike, prompt, beat, scope)
        if self.disk is None or adapters:
            return found
        on_disk = self.disk.find(prompt, beat if found is None else found[1], scope)
        return on_disk if on_disk is not None else found

    def persist(self, model: BatchContext, sequences: Iterable[Sequence]) -> None:
        """Write every saved state and the cells of `sequences` to the disk tier (a worker stops, or
        its model is unloaded), the least recently used first; return once they are written."""
        if self.disk is None:
            return
        for saved in list(self._saved.values()):
            self.disk.put(saved)
        for sequence in sorted(sequences, key=lambda s: s.last_used):
            if (len(sequence.cached) >= BLOCK or holds_media(sequence.cached)) and not sequence.adapters:
                self.disk.put(capture(model, sequence))
        self.disk.flush()

    def restore(self, model: BatchContext, sequence: Sequence, saved: SavedState, point: int) -> int:
        """Give `sequence` a saved state and cut it to its first `point` tokens (a result of `find`);
        the prompt tokens its cells then hold (0: llama.cpp refused the state)."""
        sequence.drop_cache(model)
        try:
            model.load_state(sequence.seq_id, saved.state)
            if saved.resumable.from_checkpoint(point):
                (checkpoint,) = [c for c in saved.checkpoints if c.position == point]
                model.load_state(sequence.seq_id, checkpoint.state, partial=True)
        except RuntimeError:  # no room in the cache: evaluate the prompt instead
            sequence.drop_cache(model)
            if saved.key in self._saved:
                self._drop(saved.key)
            return 0
        if not model.forget(sequence.seq_id, point, -1):
            sequence.drop_cache(model)
            return 0
        sequence.cached = list(saved.tokens[:point])
        sequence.checkpoints.replace(tuple(c for c in saved.checkpoints if c.position <= point))
        sequence.adapters, sequence.scope = saved.adapters, saved.scope
        sequence.pinned = (point, saved.pinned_until)  # still asked to stay, while it holds the prefix
        if saved.key in self._saved:  # (saving the sequence's own cells may have pushed it out)
            self._saved.move_to_end(saved.key)
        self.restored_tokens += point
        return point

    def held(self, scope: str) -> list[tuple[int, ...]]:
        """The tokens of every saved state of cache `scope` in memory (a copy: the batcher's thread
        changes the dict)."""
        return [key[2] for key in list(self._saved) if key[0] == scope]

    def published(self) -> list[list[int]]:
        """Block hashes of the most recently used saved states, for routing (blocks they can resume);
        those of the base model only, as routing hears of tokens, not of LoRA scales."""
        plain = [saved for saved in self._saved.values() if not saved.adapters]
        recent = plain[-PUBLISHED:]
        rows = [resumable_only(saved.blocks, saved.resumable) for saved in recent]
        return rows + [[]] * (PUBLISHED - len(recent))

    def _victim(self, coming: SavedState) -> tuple[str, tuple[float, ...], tuple[int, ...]] | None:
        """The least recently used state not pinned (Anthropic's cache_control, within its time);
        if every one is, the least recently used of them, only for a state pinned itself."""
        now = time.monotonic()
        loose = [key for key, saved in self._saved.items() if saved.pinned_until <= now]
        if loose:
            return loose[0]
        return next(iter(self._saved)) if coming.pinned_until > now else None

    def _drop(self, key: tuple[str, tuple[float, ...], tuple[int, ...]]) -> SavedState:
        dropped = self._saved.pop(key)
        self.used -= dropped.size
        self.version += 1
        return dropped
