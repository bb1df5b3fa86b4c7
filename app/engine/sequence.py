"""One of the context's sequences: the tokens its KV cells hold, and the choice it may be generating."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from app.engine.checkpoints import Checkpoint, Checkpoints
from app.engine.choice import NO_DRAFT, Choice, Job
from app.engine.context import BatchContext, Sampler
from app.engine.memory import MemoryKind, Resumable
from app.engine.speculative.history import Drafter
from app.engine.text_assembly import TextAssembler
from app.engine.types import Chunk, PromptProgress, TokenLogprob


@dataclass(eq=False)  # identity: two idle sequences are not the same sequence
class Sequence:
    """A sequence id of the context, the tokens its cells hold, and the choice it holds while busy.

    `cached` lists the tokens whose KV this sequence holds at positions 0..n-1; a token
    joins it when it is put in a batch (and leaves again if that decode fails).
    """

    seq_id: int
    cached: list[int] = field(default_factory=list)
    last_used: int = 0
    choice: Choice | None = None
    adapters: tuple[float, ...] = ()  # the LoRA scales its cells were evaluated with (): the base model
    scope: str = ""  # whose prompt its cells hold (ChoicePlan.cache_scope)
    session: str = ""  # the conversation its cells hold a prompt of (ChoicePlan.session)
    checkpoints: Checkpoints = field(default_factory=lambda: Checkpoints(0))
    # A prefix of its cells a client asked to keep (tokens), and until when (time.monotonic()).
    pinned: tuple[int, float] = (0, 0.0)

    def resumable(self, memory: MemoryKind, model: BatchContext) -> Resumable:
        """Where its cached tokens can be picked up exactly (live cells, or a checkpoint)."""
        held = len(self.cached)
        pos_min = model.pos_min(self.seq_id) if memory.sliding and held else 0
        return Resumable(held, memory.live_from(held, pos_min), self.checkpoints.positions)

    def drop_cache(self, model: BatchContext) -> None:
        """Drop every cell and checkpoint it holds."""
        model.forget(self.seq_id, 0, -1)
        self.cached = []
        self.checkpoints.clear()

    def checkpoint(self, model: BatchContext) -> None:
        """Save what cannot be cut back of its memory, at the position its cells reach now."""
        self.checkpoints.add(Checkpoint(len(self.cached), model.save_state(self.seq_id, partial=True)))

    @property
    def busy(self) -> bool:
        return self.choice is not None

    def holding(self) -> Choice:
        """The choice this sequence holds (only asked of a busy sequence)."""
        if self.choice is None:
            raise RuntimeError(f"sequence {self.seq_id} holds no choice")
        return self.choice

    def start(
        self,
        job: Job,
        reused: int,
        sampler: Sampler,
        deadline: float,
        tick: int,
        drafter: Drafter | None,
    ) -> Choice:
        """Take a choice whose first `reused` prompt tokens are already in this sequence's cache."""
        prompt = job.plan.prompt_tokens
        self.cached, self.last_used = list(prompt[:reused]), tick
        self.adapters, self.scope, self.session = (
            job.plan.adapters or (),
            job.plan.cache_scope,
            job.plan.session,
        )
        pin = job.plan.pin
        if pin is not None and pin.tokens > 0:
            self.pinned = (pin.tokens, time.monotonic() + pin.seconds)
        elif reused < self.pinned[0]:  # the pinned prefix is no longer all in its cells
            self.pinned = (0, 0.0)
        pending = np.asarray(prompt[reused:], dtype=np.int32)
        assembler = TextAssembler(job.plan.stop, job.plan.n_indent)
        self.choice = Choice(job, sampler, deadline, reused, pending, assembler, drafter=drafter)
        return self.choice

    def take_prompt(self, size: int) -> np.ndarray:
        """The next `size` prompt tokens, which the caller puts in this step's batch."""
        choice = self.holding()
        taken, choice.pending = choice.pending[:size], choice.pending[size:]
        self.cached.extend(taken.tolist())
        return taken

    def note_prompt_rows(self, model: BatchContext, first_row: int, first: int, size: int) -> None:
        """Prompt logprobs: rows `first_row`.. hold the distributions after prompt tokens `first`..;
        each gives the next prompt token's log-probability, read before the next decode."""
        choice = self.holding()
        prompt, top = choice.plan.prompt_tokens, choice.plan.logprobs or 0
        if first == 0:  # the first prompt token: nothing predicted it
            choice.prompt_entries = [TokenLogprob(prompt[0], model.tokenizer.piece(prompt[0]), None, ())]
        for offset in range(size):
            position = first + offset
            if position + 1 < len(prompt):
                choice.prompt_entries.append(model.logprob(first_row + offset, prompt[position + 1], top))

    def progress_chunk(self) -> Chunk:
        """How far its prompt is evaluated (the tokens in its cells now), for `return_progress`."""
        choice = self.holding()
        total = len(choice.plan.prompt_tokens)
        elapsed = int((time.monotonic() - choice.begun) * 1000)
        done = PromptProgress(total, choice.reused, min(len(self.cached), total), elapsed)
        return Chunk("", None, 0, index=choice.plan.index, progress=done)

    def prompt_chunk(self) -> Chunk:
        """The prompt's log-probabilities, once it is evaluated (sent before any generated text)."""
        choice = self.holding()
        return Chunk("", None, 0, index=choice.plan.index, prompt_logprobs=tuple(choice.prompt_entries))

    def sample(self, model: BatchContext) -> tuple[list[Chunk], int]:
        """Sample at the choice's row, then on through the step's draft while the sampler agrees.

        Row i after the choice's row holds the logits that follow the draft's first i
        tokens, so each draw is the one plain decoding would make there; the first draw
        that differs from the draft, or that ends the choice, is the step's last. The
        cells of refused draft tokens are dropped. Returns the chunks and the draft tokens accepted.
        """
        choice = self.holding()
        draft, first, drafter = choice.draft, choice.row, choice.drafter
        draft_start = len(self.cached) - len(draft)  # the position of the draft's first token
        chunks: list[Chunk] = []
        accepted = 0
        for offset in range(len(draft) + 1):
            token = choice.sampler.sample(first + offset)
            if drafter is not None:
                drafter.push(token)
            chunk = self.advance(token, model, first + offset)
            if chunk is not None:
                chunks.append(chunk)
            if self.choice is None or offset == len(draft) or token != draft[offset]:
                break
            accepted += 1
        if len(draft):
            if drafter is not None:
                drafter.verified(len(draft), accepted)
            choice.draft = NO_DRAFT
            self.drop_after(draft_start + accepted, model)
        return chunks, accepted

    def drop_after(self, size: int, model: BatchContext) -> None:
        """Keep only the first `size` cached tokens (cells of a refused draft go).

        A sliding window may have moved past cells the next token needs, when llama.cpp
        split the drafts' decode into micro-batches: then the choice's history is
        evaluated again rather than answered from an incomplete window.
        """
        if len(self.cached) <= size:
            return
        del self.cached[size:]
        memory = model.memory_kind
        exact = model.forget(self.seq_id, size, -1)
        if not exact or self.resumable(memory, model).best(size) < size:
            self.rewind(model)

    def rewind(self, model: BatchContext) -> None:
        """Evaluate the choice's whole history again, from nothing: its prompt, what it generated,
        and its last sampled token; sampling goes on from there as if nothing happened."""
        choice = self.holding()
        assert choice.drafter is not None, "only drafting choices keep their history"
        history = choice.drafter.history  # the prompt, then every sampled token, the last one too
        self.drop_cache(model)
        choice.pending, choice.last_token, choice.stops = history.copy(), -1, ()

    def advance(self, token: int, model: BatchContext, row: int) -> Chunk | None:
        """Take a token sampled at `row`: text to send, or the choice's last chunk."""
        choice = self.holding()
        plan = choice.plan
        choice.row = -1
        if model.tokenizer.is_end_of_generation(token) and not plan.ignore_eos:
            return self.finish("stop")
        choice.count += 1
        if choice.count == 1:
            choice.generating_since = time.monotonic()
        if choice.count >= plan.min_tokens and not plan.ignore_eos:
            choice.sampler.allow_end()
        if plan.logprobs is not None:
            choice.held_logprobs.append(model.logprob(row, token, plan.logprobs))
        choice.assembler.armed = choice.count > plan.min_tokens
        text = choice.assembler.feed(model.tokenizer.piece(token))
        if choice.assembler.stopped:  # a stop string; or a line short of n_indent: a limit, as llama-server's
            return self.finish("length" if choice.assembler.cut_short else "stop", text)
        choice.last_token = token
        if choice.count >= plan.max_tokens or _out_of_time(choice, text):
            return self.finish("length", text)
        if not text:
            return None
        chunk = Chunk(text, None, choice.count, index=plan.index, logprobs=tuple(choice.held_logprobs))
        choice.held_logprobs = []
        return chunk

    def finish(self, reason: str, text: str = "", error: str | None = None) -> Chunk:
        """End the choice: its last chunk, with whatever text was held back. Keeps the cache."""
        choice = self.holding()
        assembler = choice.assembler
        tail = text
        if reason not in ("cancelled", "error", "kv_full"):
            tail += assembler.finish()
        # Tokens of a stop string are not part of the answer, nor are their log-probabilities.
        logprobs = () if assembler.stopped else tuple(choice.held_logprobs)
        chunk = Chunk(
            tail,
            reason,
            choice.count,
            index=choice.plan.index,
            logprobs=logprobs,
            error=error,
            cached_tokens=choice.reused,
            stop_sequence=assembler.matched,
            prediction_accepted=choice.drafter.prediction_accepted if choice.drafter else 0,
        )
        choice.sampler.close()
        self.choice = None
        return chunk


def _out_of_time(choice: Choice, text: str) -> bool:
    """Past the choice's deadline (LLM_MAX_GENERATION_SECONDS); or, with llama-server's
    t_max_predict_ms, generating for longer than it when a newline comes."""
    now, limit = time.monotonic(), choice.plan.t_max_predict_ms
    if now > choice.deadline:
        return True
    return bool(limit) and "\n" in text and (now - choice.generating_since) * 1000 > limit
