"""The loop that owns a worker's llama.cpp context: each step admits, batches, decodes once, samples."""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import llama_cpp
import numpy as np
from gevent import monkey

from app.engine import scheduling
from app.engine.batch import TokenBatch
from app.engine.model import LoadedModel
from app.engine.sampler import SequenceSampler
from app.engine.sequence import Job, Sequence
from app.engine.threads import ThreadGovernor
from app.engine.types import Chunk

log = logging.getLogger(__name__)

# gevent swaps queue.SimpleQueue for a greenlet one once patched; this thread is not a
# greenlet, so it blocks on the real one (and releases the GIL while it waits).
NativeQueue = monkey.get_original("queue", "SimpleQueue")

Delivery = list[tuple[Any, Chunk]]


@dataclass(frozen=True)
class StepReport:
    """What one step did, for telemetry."""

    busy: int  # sequences holding a choice after the step
    decoded: int  # tokens in the step's batch
    reused: int  # prompt tokens admitted this step that were already in the KV cache
    seconds: float  # time spent in llama_decode
    threads: int  # llama.cpp threads chosen for the next step
    sampled: int = 0  # tokens generated (one per sequence sampled)


@dataclass(frozen=True)
class BatcherSettings:
    prefill_chunk: int  # most prompt tokens per step, so running streams wait at most one chunk
    reuse_cache: bool  # start a prompt from a cached prefix (prompt cache)
    max_seconds: float  # wall time of one choice; 0: no limit


class Batcher:
    """Runs in the worker's native thread; only it touches the context.

    Greenlets hand it choices through `submit` (thread-safe); it hands back each step's
    chunks through `deliver`, which must be thread-safe too (the engine posts them to
    the hub). A choice leaves the step after it finishes or its generation is cancelled.
    """

    def __init__(
        self, model: LoadedModel, settings: BatcherSettings, deliver: Callable[[Delivery, StepReport], None]
    ) -> None:
        self.model = model
        self.settings = settings
        self._deliver = deliver
        self._inbox: Any = NativeQueue()
        self.sequences = [Sequence(seq_id) for seq_id in range(model.shape.parallel)]
        self._batch = TokenBatch(model.n_batch)
        self._end_tokens = [t for t in range(model.n_vocab) if model.tokenizer.is_end_of_generation(t)]
        self._tick = 0
        self._reused = 0
        self.governor = ThreadGovernor(model.shape.n_threads, model.set_threads)

    def submit(self, job: Job | None) -> None:
        """Queue a choice for the next step (from any thread); None stops the loop."""
        self._inbox.put(job)

    def run(self) -> None:
        """Step until told to stop; block while there is nothing to do."""
        while True:
            delivery: Delivery = []
            try:
                if not self._busy() and not self._take(self._inbox.get(), delivery):  # waits, GIL released
                    return
                while not self._inbox.empty():
                    if not self._take(self._inbox.get(), delivery):
                        return
                report = self.step(delivery)
            except Exception:  # noqa: BLE001 - a failed step must not end the loop or strand a client
                delivery.extend(self._fail_all(traceback.format_exc()))
                report = StepReport(0, 0, 0, 0.0, self.governor.threads)
            self._deliver(delivery, report)

    def _take(self, job: Job | None, delivery: Delivery) -> bool:
        """Admit one choice (False: the loop is told to stop); a choice that cannot start fails alone."""
        if job is None:
            return False
        try:
            self._admit(job)
        except Exception:  # noqa: BLE001 - e.g. a sampler llama.cpp refused to build
            failed = Chunk(finish_reason="error", index=job.request.index, error=traceback.format_exc())
            delivery.append((job.generation, failed))
        return True

    def _admit(self, job: Job) -> None:
        prompt = job.request.prompt_tokens
        # Scoring a prompt needs every one of its tokens evaluated: nothing reused or shared.
        scoring = job.request.prompt_logprobs
        views = [scheduling.CacheView(s.seq_id, s.cached, s.last_used, not s.busy) for s in self.sequences]
        reuse = self.settings.reuse_cache and not scoring
        placement = scheduling.place(views, prompt, reuse, self.model.shape.unified)
        target = self.sequences[placement.seq_id]
        memory = self.model.memory
        self._tick += 1
        deadline = time.monotonic() + self.settings.max_seconds if self.settings.max_seconds else float("inf")
        sampler = SequenceSampler(job.request, self.model, self._end_tokens)
        leader = None if scoring else self._leader_for(prompt)
        if leader is not None:  # it will share the leader's cells once they are evaluated
            llama_cpp.llama_memory_seq_rm(memory, target.seq_id, 0, -1)
            target.start(job, 0, sampler, deadline, self._tick)
            target.pending, target.leader = target.pending[:0], leader
            return
        if placement.donor is not None:
            llama_cpp.llama_memory_seq_rm(memory, target.seq_id, 0, -1)
            # Within one unified cache this copies no data, only which sequences own the cells.
            llama_cpp.llama_memory_seq_cp(memory, placement.donor, target.seq_id, 0, placement.reuse)
        else:
            llama_cpp.llama_memory_seq_rm(memory, target.seq_id, placement.reuse, -1)
        target.start(job, placement.reuse, sampler, deadline, self._tick)
        self._reused += placement.reuse

    def _leader_for(self, prompt: list[int]) -> Sequence | None:
        """A sequence already evaluating this very prompt (another choice of the same request)."""
        for s in self.sequences:
            if s.prefilling and s.job is not None and s.job.request.prompt_tokens == prompt:
                return None if s.job.request.prompt_logprobs else s
        return None

    def step(self, delivery: Delivery) -> StepReport:
        """One batch: every generating sequence's next token plus a budget of prompt tokens.

        Chunks go into `delivery` as they are made, so that none is lost if a later
        part of the step fails.
        """
        self._retire_cancelled(delivery)
        batch = self._batch
        batch.clear()
        generating = [s for s in self.sequences if s.generating and s.i_batch < 0]
        prefilling = sorted((s for s in self.sequences if s.prefilling), key=lambda s: s.last_used)
        budget = scheduling.prompt_budget(self.settings.prefill_chunk, batch.capacity - len(generating))
        shares = dict(scheduling.share_prompt([(s.seq_id, len(s.pending)) for s in prefilling], budget))
        taken: list[tuple[Sequence, np.ndarray]] = []
        scored: list[tuple[Sequence, int, int, int]] = []  # prompt_logprobs: (seq, row, position, size)
        # In id order: with cells per sequence, llama.cpp runs one graph per run of
        # consecutive sequence ids, so a prompt chunk goes between its neighbours.
        for s in self.sequences:
            if s in generating:  # one token each, logits on
                s.i_batch = batch.add(s.last_token, len(s.cached), s.seq_id, True)
                s.cached.append(s.last_token)
            elif s.seq_id in shares:
                first, row = len(s.cached), batch.size
                tokens = s.take_prompt(shares[s.seq_id])
                every = s.job.request.prompt_logprobs  # type: ignore[union-attr]
                last = batch.add_run(
                    tokens, first, s.seq_id, logits_last=len(s.pending) == 0, logits_all=every
                )
                taken.append((s, tokens))
                if every:
                    scored.append((s, row, first, len(tokens)))
                if len(s.pending) == 0:
                    s.i_batch = last
        reused, self._reused = self._reused, 0
        if batch.size == 0:
            return StepReport(self._busy(), 0, reused, 0.0, self.governor.threads)
        clocks = self.governor.start()
        code = batch.decode(self.model.ctx)
        seconds = self.governor.clock() - clocks[0]
        if code == 1:
            self._undo(taken)
            self._make_room(delivery)
            return StepReport(self._busy(), 0, reused, seconds, self.governor.threads)
        if code != 0:
            raise RuntimeError(f"llama_decode failed with {code}")
        self.governor.finish(clocks)
        self._hand_prompt_to_followers()
        ctx, tokenizer, n_vocab = self.model.ctx, self.model.tokenizer, self.model.n_vocab
        for s, row, first, size in scored:
            s.note_prompt_rows(ctx, row, first, size, tokenizer, n_vocab)
            if s.i_batch >= 0:  # the whole prompt is in: its log-probabilities go first
                delivery.append((s.job.generation, s.prompt_chunk()))  # type: ignore[union-attr]
                if s.job.request.max_tokens == 0:  # type: ignore[union-attr]  # scoring only
                    delivery.append((s.job.generation, s.finish("length")))  # type: ignore[union-attr]
        sampled = 0
        for s in self.sequences:
            if s.busy and s.i_batch >= 0:
                sampled += 1
                generation = s.job.generation  # type: ignore[union-attr]
                chunk = s.advance(s.sampler.sample(ctx, s.i_batch), ctx, tokenizer, n_vocab)  # type: ignore[union-attr]
                if chunk is not None:
                    delivery.append((generation, chunk))
                    if chunk.finish_reason is not None:
                        self._orphan_followers(s)
        return StepReport(self._busy(), batch.size, reused, seconds, self.governor.threads, sampled)

    def _busy(self) -> int:
        return sum(1 for s in self.sequences if s.busy)

    def _retire_cancelled(self, delivery: Delivery) -> None:
        for s in self.sequences:
            if s.busy and s.job.generation.cancelled:  # type: ignore[union-attr]
                delivery.append((s.job.generation, s.finish("cancelled")))  # type: ignore[union-attr]
                self._orphan_followers(s)

    def _hand_prompt_to_followers(self) -> None:
        """Choices waiting on a leader's prompt share its cells and sample from its row."""
        for follower in self.sequences:
            leader = follower.leader
            if (
                leader is not None
                and leader.i_batch >= 0
                and len(leader.pending) == 0
                and leader.last_token < 0
            ):
                # One pool: the cells get a second owner. Cells per sequence: llama.cpp copies
                # the leader's whole buffer at the next decode (its only way across them).
                span = (0, len(leader.cached)) if self.model.shape.unified else (-1, -1)
                llama_cpp.llama_memory_seq_cp(self.model.memory, leader.seq_id, follower.seq_id, *span)
                follower.cached, follower.leader, follower.i_batch = list(leader.cached), None, leader.i_batch

    def _orphan_followers(self, gone: Sequence) -> None:
        """Followers of a leader that left before its prompt was done evaluate the prompt themselves."""
        for s in self.sequences:
            if s.leader is gone:
                s.leader = None
                s.pending = np.asarray(s.job.request.prompt_tokens, dtype=np.int32)  # type: ignore[union-attr]

    def _undo(self, taken: list[tuple[Sequence, np.ndarray]]) -> None:
        """The decode did not happen: take this step's tokens back out of the sequences."""
        for s in self.sequences:
            if s.generating and s.i_batch >= 0:
                s.cached.pop()
                s.i_batch = -1
        for s, tokens in taken:
            del s.cached[len(s.cached) - len(tokens) :]
            s.pending = np.concatenate([tokens, s.pending])
            s.i_batch = -1

    def _make_room(self, delivery: Delivery) -> None:
        """The KV cache is full: drop idle sequences' caches, or else end the largest choice."""
        idle = [s for s in self.sequences if not s.busy and s.cached]
        for s in idle:
            llama_cpp.llama_memory_seq_rm(self.model.memory, s.seq_id, 0, -1)
            s.cached = []
        if idle:
            return
        victim = max((s for s in self.sequences if s.busy), key=lambda s: len(s.cached), default=None)
        if victim is None:
            return
        log.warning("the KV cache is full: ending one choice of %d tokens to make room", len(victim.cached))
        delivery.append((victim.job.generation, victim.finish("kv_full")))  # type: ignore[union-attr]
        self._orphan_followers(victim)
        llama_cpp.llama_memory_seq_rm(self.model.memory, victim.seq_id, 0, -1)
        victim.cached = []

    def _fail_all(self, error: str) -> Delivery:
        """After an unexpected failure: end every choice with an error and start from a clean cache."""
        delivery = [(s.job.generation, s.finish("error", error=error)) for s in self.sequences if s.busy]
        llama_cpp.llama_memory_clear(self.model.memory, True)
        for s in self.sequences:
            s.cached = []
        return delivery
