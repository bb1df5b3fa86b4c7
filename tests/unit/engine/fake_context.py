"""A context for the batcher with no weights: it decodes by counting, so every answer is predictable.

Each token's logits row "predicts" the token after it: the next token is the row's token
plus one, and 99 is followed by 0, the end of generation. A prompt `[5, 6, 7]` therefore
generates 8, 9, 10... Every call the batcher makes is recorded, and every KV cell is
tracked per sequence, so a test sees what was decoded where.

Its memory can be another kind (`memory`), kept as llama.cpp keeps it: a sliding window
forgets positions once `swa_cells` newer ones are held (`lost`: the oldest it still has),
and a recurrent state folds in every token (`folded`: how many) and refuses to be cut
back. A decode asserts the memory holds everything its tokens need, so a batcher that
resumes where the memory cannot fails the test.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.engine.batch import TokenBatch
from app.engine.choice import Job
from app.engine.context import ContextShape
from app.engine.generation import Generation
from app.engine.media import MediaRun
from app.engine.memory import MemoryKind
from app.engine.types import ChoicePlan, TokenLogprob

END = 0


class CountingPieces:
    """Token t reads `<t>`; 0 ends generation."""

    adds_bos = False

    def is_end_of_generation(self, token: int) -> bool:
        return token == END

    def piece(self, token: int) -> bytes:
        return f"<{token}>".encode()


@dataclass
class Row:
    token: int
    position: int
    seq_id: int


class CountingSampler:
    """Reads the next token off the context's row, as a greedy sampler would."""

    def __init__(self, context: FakeContext) -> None:
        self.context = context
        self.ends_allowed = False
        self.closed = False
        self.accepted: list[int] = []

    def sample(self, row: int) -> int:
        assert row in self.context.logits_rows, f"row {row} has no logits"
        return self.context.next_token(row)

    def accept(self, token: int) -> None:
        self.accepted.append(token)

    def allow_end(self) -> None:
        self.ends_allowed = True

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeContext:
    """A BatchContext that counts: see the module's docstring."""

    parallel: int = 2
    n_ctx: int = 64
    kv_size: int = 0
    n_batch: int = 32
    fingerprint: str = "fp_fake"
    n_vocab: int = 100
    tokenizer: CountingPieces = field(default_factory=CountingPieces)
    decodes: list[list[Row]] = field(default_factory=list)  # every decode, its rows
    cells: dict[int, dict[int, int]] = field(default_factory=dict)  # seq_id -> position -> token
    full: int = 0  # the next this many decodes find the KV cache full
    fail: bool = False  # the next decode raises
    samplers: list[CountingSampler] = field(default_factory=list)
    shares: list[tuple[int, int, int, int]] = field(default_factory=list)
    threads: list[int] = field(default_factory=list)
    logits_rows: set[int] = field(default_factory=set)
    adapters: tuple[float, ...] = ()  # the LoRA scales set now
    decoded_with: list[tuple[float, ...]] = field(default_factory=list)  # each decode's LoRA scales
    loaded_adapters: dict[int, str] = field(default_factory=dict)  # loaded at run time, by place
    freed_adapters: set[int] = field(default_factory=set)
    memory: MemoryKind = field(default_factory=MemoryKind)
    swa_cells: int = 0  # sliding window: positions held per sequence (0: window + 8)
    lost: dict[int, int] = field(default_factory=dict)  # sliding window: oldest position still held
    folded: dict[int, int] = field(default_factory=dict)  # recurrent: tokens folded into the state
    partial_loads: list[int] = field(default_factory=list)  # positions of checkpoints restored
    media_evaluated: list[tuple[int, int, int]] = field(default_factory=list)  # seq_id, first, length
    media_full: int = 0  # the next this many media evaluations find the KV cache full
    media_encoded: list[int] = field(default_factory=list)  # each encoding's placeholder
    encode_fails: bool = False
    encode_gate: threading.Event = field(default_factory=lambda: _open_gate())

    @property
    def memory_kind(self) -> MemoryKind:
        return self.memory

    @property
    def shape(self) -> ContextShape:
        return ContextShape(
            self.parallel, self.n_ctx, self.kv_size or self.parallel * self.n_ctx, self.n_batch, 1
        )

    def decode(self, batch: TokenBatch) -> int:
        if self.fail:
            self.fail = False
            raise RuntimeError("the fake decode failed")
        rows = [
            Row(int(batch.tokens[i]), int(batch.positions[i]), int(batch.seq_ids[i]))
            for i in range(batch.size)
        ]
        if self.full:
            self.full -= 1
            return 1
        for row in rows:
            cells = self.cells.setdefault(row.seq_id, {})
            assert row.position == len(cells), f"sequence {row.seq_id}: position {row.position} leaves a gap"
            self._check_memory(row.seq_id, row.position)
            cells[row.position] = row.token
        for row in rows:  # a window moves on once the whole batch is in (as a micro-batch's cells)
            if self.memory.window:
                held = self.swa_cells or self.memory.window + 8
                self.lost[row.seq_id] = max(self.lost.get(row.seq_id, 0), row.position + 1 - held)
        self.decodes.append(rows)
        self.decoded_with.append(self.adapters)
        self.logits_rows = {i for i in range(batch.size) if batch.logits[i]}
        return 0

    def encode_media(self, run: MediaRun) -> np.ndarray | None:
        """The encoder's thread: one 'embedding' per position, the placeholder itself."""
        self.encode_gate.wait(10)  # a test holds the encoder here to see what goes on meanwhile
        self.media_encoded.append(run.placeholder)
        return None if self.encode_fails else np.full(run.length, run.placeholder, dtype=np.float64)

    def decode_media(self, run: MediaRun, embeddings: np.ndarray, seq_id: int, first: int) -> int:
        """A medium's positions hold its placeholder; its evaluation leaves no logits to sample."""
        if self.media_full:
            self.media_full -= 1
            return 1
        cells = self.cells.setdefault(seq_id, {})
        assert first == len(cells), f"sequence {seq_id}: a medium at {first} leaves a gap"
        for position in range(first, first + run.length):
            self._check_memory(seq_id, position)
            cells[position] = int(embeddings[position - first])
        self.media_evaluated.append((seq_id, first, run.length))
        self.logits_rows = set()
        return 0

    def next_token(self, row: int) -> int:
        token = self.decodes[-1][row].token
        return END if token == 99 else token + 1

    def _check_memory(self, seq_id: int, position: int) -> None:
        """What a token at `position` needs of the memory is there."""
        if self.memory.window:
            lost = self.lost.get(seq_id, 0)
            assert lost <= max(0, position - self.memory.window + 1), (
                f"sequence {seq_id}: position {position} needs the window, positions from {lost} are held"
            )
        if self.memory.recurrent:
            folded = self.folded.get(seq_id, 0)
            assert folded == position, f"sequence {seq_id}: the state holds {folded} tokens, not {position}"
            self.folded[seq_id] = position + 1

    def move(self, seq_id: int, start: int, end: int, delta: int) -> None:
        cells = self.cells.setdefault(seq_id, {})
        moved = {p: cells.pop(p) for p in sorted(cells) if p >= start and (end < 0 or p < end)}
        cells.update({p + delta: token for p, token in moved.items()})

    def forget(self, seq_id: int, start: int, end: int) -> bool:
        cells = self.cells.setdefault(seq_id, {})
        folded = self.folded.get(seq_id, 0)
        if self.memory.recurrent and 0 < start < folded and end < 0:
            return False  # a recurrent state cannot be cut back
        for position in [p for p in cells if p >= start and (end < 0 or p < end)]:
            del cells[position]
        if start <= 0 and end < 0:
            self.lost[seq_id] = self.folded[seq_id] = 0
        return True

    def pos_min(self, seq_id: int) -> int:
        cells = self.cells.get(seq_id, {})
        if not cells:
            return -1
        return max(min(cells), self.lost.get(seq_id, 0))

    def share(self, source: int, target: int, start: int, end: int) -> None:
        self.shares.append((source, target, start, end))
        copied = self.cells.get(source, {})
        self.cells[target] = {p: t for p, t in copied.items() if start < 0 or start <= p < end}
        self.lost[target], self.folded[target] = self.lost.get(source, 0), self.folded.get(source, 0)

    def clear(self) -> None:
        self.cells.clear()
        self.lost.clear()
        self.folded.clear()

    def save_state(self, seq_id: int, partial: bool = False) -> bytes:
        # As llama.cpp's state_write: of a window, only the cells the next token attends to.
        held = len(self.cells.get(seq_id, {}))
        lost = max(self.lost.get(seq_id, 0), held - self.memory.window if self.memory.window else 0)
        memory = {"lost": lost, "folded": self.folded.get(seq_id, 0)}
        if partial:
            return json.dumps(memory).encode()
        return json.dumps({**memory, "cells": sorted(self.cells.get(seq_id, {}).items())}).encode()

    def load_state(self, seq_id: int, state: bytes, partial: bool = False) -> None:
        saved = json.loads(state)
        self.lost[seq_id], self.folded[seq_id] = saved["lost"], saved["folded"]
        if partial:  # the window's cells, or the state, as they were at that position
            self.partial_loads.append(saved["folded"] if self.memory.recurrent else saved["lost"])
            return
        assert not self.cells.get(seq_id), "llama.cpp restores into an empty sequence"
        self.cells[seq_id] = {position: token for position, token in saved["cells"]}

    def sampler(self, request: ChoicePlan, end_tokens: list[int]) -> CountingSampler:
        assert end_tokens == [END]
        sampler = CountingSampler(self)
        self.samplers.append(sampler)
        return sampler

    def logprob(self, row: int, token: int, top: int) -> TokenLogprob:
        return TokenLogprob(token, self.tokenizer.piece(token), -float(row), ())

    def set_threads(self, n_threads: int) -> None:
        self.threads.append(n_threads)

    def set_adapters(self, scales: tuple[float, ...]) -> None:
        self.adapters = scales

    def has_adapter(self, index: int) -> bool:
        return index not in self.freed_adapters

    def load_adapter(self, index: int, path: str) -> None:
        if path.endswith("bad.gguf"):
            raise ValueError(f"llama.cpp could not load {path}")
        self.freed_adapters.discard(index)
        self.loaded_adapters[index] = path

    def free_adapter(self, index: int) -> None:
        self.freed_adapters.add(index)

    def close(self) -> None:
        self.clear()


def _open_gate() -> threading.Event:
    gate = threading.Event()
    gate.set()
    return gate


def job(prompt: list[int], max_tokens: int = 3, index: int = 0, **fields: Any) -> Job:
    """A choice of a request with `prompt`, and the generation that owns it (never iterated here)."""
    request = ChoicePlan(prompt, max_tokens, index=index, **fields)
    return Job(Generation([request], lambda _: None, keepalive=0, queue_timeout=60), request)
