"""One of the context's sequences: the tokens its KV cells hold, and the choice it is generating."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.engine.sampler import SequenceSampler, logprob_at
from app.engine.text_assembly import TextAssembler
from app.engine.types import Chunk, GenerationRequest, TokenLogprob


@dataclass(eq=False)
class Job:
    """A choice handed to the batcher: the request, and the generation whose client waits for it."""

    generation: Any  # app.engine.generation.Generation: read for `cancelled` only
    request: GenerationRequest


@dataclass(eq=False)  # identity: two idle sequences are not the same sequence
class Sequence:
    """A sequence id of the context, its cache, and (while busy) the state of one choice.

    `cached` lists the tokens whose KV this sequence holds at positions 0..n-1; a token
    joins it when it is put in a batch (and leaves again if that decode fails).
    """

    seq_id: int
    cached: list[int] = field(default_factory=list)
    last_used: int = 0
    job: Job | None = None
    pending: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))  # prompt left
    leader: Sequence | None = None  # same prompt, evaluated by that sequence (n > 1)
    sampler: SequenceSampler | None = None
    assembler: TextAssembler | None = None
    last_token: int = -1  # sampled, not yet decoded
    i_batch: int = -1  # the row of the current batch to sample from, if any
    count: int = 0
    reused: int = 0
    deadline: float = 0.0
    held_logprobs: list[TokenLogprob] = field(default_factory=list)
    prompt_entries: list[TokenLogprob] = field(default_factory=list)  # prompt_logprobs

    @property
    def busy(self) -> bool:
        return self.job is not None

    @property
    def prefilling(self) -> bool:
        return self.busy and self.leader is None and len(self.pending) > 0

    @property
    def generating(self) -> bool:
        return self.busy and self.last_token >= 0

    def start(self, job: Job, reused: int, sampler: SequenceSampler, deadline: float, tick: int) -> None:
        """Take a choice whose first `reused` prompt tokens are already in this sequence's cache."""
        prompt = job.request.prompt_tokens
        self.job, self.reused, self.sampler, self.deadline, self.last_used = (
            job,
            reused,
            sampler,
            deadline,
            tick,
        )
        self.cached = list(prompt[:reused])
        self.pending = np.asarray(prompt[reused:], dtype=np.int32)
        self.assembler = TextAssembler(job.request.stop)
        self.leader, self.last_token, self.i_batch, self.count = None, -1, -1, 0
        self.held_logprobs = []
        self.prompt_entries = []

    def note_prompt_rows(
        self, ctx: Any, first_row: int, first: int, size: int, tokenizer: Any, n_vocab: int
    ) -> None:
        """Prompt logprobs: rows `first_row`.. hold the distributions after prompt tokens `first`..;
        each gives the next prompt token's log-probability, read before the next decode."""
        prompt = self.job.request.prompt_tokens  # type: ignore[union-attr]
        top = self.job.request.logprobs or 0  # type: ignore[union-attr]
        if first == 0:  # the first prompt token: nothing predicted it
            self.prompt_entries = [TokenLogprob(prompt[0], tokenizer.piece(prompt[0]), None, ())]
        for offset in range(size):
            position = first + offset
            if position + 1 < len(prompt):
                entry = logprob_at(
                    ctx, first_row + offset, n_vocab, prompt[position + 1], top, tokenizer.piece
                )
                self.prompt_entries.append(entry)

    def prompt_chunk(self) -> Chunk:
        """The prompt's log-probabilities, once it is evaluated (sent before any generated text)."""
        request = self.job.request  # type: ignore[union-attr]
        return Chunk("", None, 0, index=request.index, prompt_logprobs=tuple(self.prompt_entries))

    def take_prompt(self, size: int) -> np.ndarray:
        """The next `size` prompt tokens, which the caller puts in this step's batch."""
        taken, self.pending = self.pending[:size], self.pending[size:]
        self.cached.extend(taken.tolist())
        return taken

    def advance(self, token: int, ctx: Any, tokenizer: Any, n_vocab: int) -> Chunk | None:
        """Take the token just sampled at `i_batch`: text to send, or the choice's last chunk."""
        request = self.job.request  # type: ignore[union-attr]
        index, self.i_batch = self.i_batch, -1
        if tokenizer.is_end_of_generation(token) and not request.ignore_eos:
            return self.finish("stop")
        self.count += 1
        if self.count >= request.min_tokens and not request.ignore_eos and self.sampler is not None:
            self.sampler.allow_end()
        if request.logprobs is not None:
            self.held_logprobs.append(
                logprob_at(ctx, index, n_vocab, token, request.logprobs, tokenizer.piece)
            )
        assembler = self.assembler
        assembler.armed = self.count > request.min_tokens  # type: ignore[union-attr]
        text = assembler.feed(tokenizer.piece(token))  # type: ignore[union-attr]
        if assembler.stopped:  # type: ignore[union-attr]
            return self.finish("stop", text)
        if self.count >= request.max_tokens or time.monotonic() > self.deadline:
            self.last_token = token
            return self.finish("length", text)
        self.last_token = token
        if not text:
            return None
        chunk = Chunk(text, None, self.count, index=request.index, logprobs=tuple(self.held_logprobs))
        self.held_logprobs = []
        return chunk

    def finish(self, reason: str, text: str = "", error: str | None = None) -> Chunk:
        """End the choice: its last chunk, with whatever text was held back. Keeps the cache."""
        request = self.job.request  # type: ignore[union-attr]
        assembler = self.assembler
        tail = text
        if assembler is not None and reason not in ("cancelled", "error", "kv_full"):
            tail += assembler.finish()
        # Tokens of a stop string are not part of the answer, nor are their log-probabilities.
        logprobs = () if assembler is not None and assembler.stopped else tuple(self.held_logprobs)
        chunk = Chunk(
            tail,
            reason,
            self.count,
            index=request.index,
            logprobs=logprobs,
            error=error,
            cached_tokens=self.reused,
            stop_sequence=assembler.matched if assembler is not None else None,
        )
        if self.sampler is not None:
            self.sampler.close()
        self.job = self.sampler = self.assembler = self.leader = None
        self.last_token, self.i_batch = -1, -1
        self.pending = self.pending[:0]
        return chunk
