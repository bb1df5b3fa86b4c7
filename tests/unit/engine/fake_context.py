"""A context for the batcher with no weights: it decodes by counting, so every answer is predictable.

Each token's logits row "predicts" the token after it: the next token is the row's token
plus one, and 99 is followed by 0, the end of generation. A prompt `[5, 6, 7]` therefore
generates 8, 9, 10... Every call the batcher makes is recorded, and every KV cell is
tracked per sequence, so a test sees what was decoded where.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from app.engine.batch import TokenBatch
from app.engine.context import ContextShape
from app.engine.generation import Generation
from app.engine.sequence import Job
from app.engine.types import GenerationRequest, TokenLogprob

END = 0


class CountingPieces:
    """Token t reads `<t>`; 0 ends generation."""

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
            cells[row.position] = row.token
        self.decodes.append(rows)
        self.decoded_with.append(self.adapters)
        self.logits_rows = {i for i in range(batch.size) if batch.logits[i]}
        return 0

    def next_token(self, row: int) -> int:
        token = self.decodes[-1][row].token
        return END if token == 99 else token + 1

    def forget(self, seq_id: int, start: int, end: int) -> None:
        cells = self.cells.setdefault(seq_id, {})
        for position in [p for p in cells if p >= start and (end < 0 or p < end)]:
            del cells[position]

    def share(self, source: int, target: int, start: int, end: int) -> None:
        self.shares.append((source, target, start, end))
        copied = self.cells.get(source, {})
        self.cells[target] = {p: t for p, t in copied.items() if start < 0 or start <= p < end}

    def clear(self) -> None:
        self.cells.clear()

    def save_state(self, seq_id: int) -> bytes:
        return json.dumps(sorted(self.cells.get(seq_id, {}).items())).encode()

    def load_state(self, seq_id: int, state: bytes) -> None:
        assert not self.cells.get(seq_id), "llama.cpp restores into an empty sequence"
        self.cells[seq_id] = {position: token for position, token in json.loads(state)}

    def sampler(self, request: GenerationRequest, end_tokens: list[int]) -> CountingSampler:
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

    def close(self) -> None:
        self.cells.clear()


def job(prompt: list[int], max_tokens: int = 3, index: int = 0, **fields: object) -> Job:
    """A choice of a request with `prompt`, and the generation that owns it (never iterated here)."""
    request = GenerationRequest(prompt, max_tokens, index=index, **fields)
    return Job(Generation([request], lambda _: None, keepalive=0, queue_timeout=60), request)
