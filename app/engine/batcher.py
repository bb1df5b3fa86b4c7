"""The loop that owns a worker's llama.cpp context: each step admits, batches, decodes once, samples."""

from __future__ import annotations

import logging
import queue
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from gevent import monkey

from app.engine import draft_step, media, recovery, scheduling
from app.engine.batch import TokenBatch
from app.engine.batcher_settings import BatcherSettings, StepReport
from app.engine.cache import context_shift, resumption, shared_prompt, slot_actions
from app.engine.cache.cache_report import CacheReport
from app.engine.cache.disk_cache import DiskCache
from app.engine.cache.host_cache import PUBLISHED, HostCache
from app.engine.cache.slot_actions import SlotAction
from app.engine.checkpoints import Checkpoints
from app.engine.choice import Choice, Job
from app.engine.context import BatchContext, Sampler
from app.engine.filling import fill
from app.engine.generation import Delivery
from app.engine.lora.adapter_places import AdapterChange, AdapterPlaces
from app.engine.lora.adapter_turns import AdapterTurns
from app.engine.memory import checkpoint_stops
from app.engine.multimodal import media_step
from app.engine.multimodal.media_encoder import MediaEncoder
from app.engine.sampling import sampling_step
from app.engine.sampling.thinking import BudgetedSampler
from app.engine.sequence import Sequence
from app.engine.speculative.draft_model import DraftModel
from app.engine.threads import ThreadGovernor
from app.engine.types import Chunk

log = logging.getLogger(__name__)

# gevent swaps queue.SimpleQueue for a greenlet one once patched; this thread is not a
# greenlet, so it blocks on the real one (and releases the GIL while it waits).


class Wake:
    """Put in the inbox by the media encoder when an encoding is done."""


@dataclass(frozen=True)
class Persist:
    """Put in the inbox when the worker stops: write the cells to the disk tier, then call `done`."""

    done: Callable[[], None]


Inbox = Job | AdapterChange | SlotAction | Wake | Persist | None
NativeQueue: type[queue.SimpleQueue[Inbox]] = monkey.get_original("queue", "SimpleQueue")


class Batcher:
    """Runs in the worker's native thread; only it touches the context.

    Greenlets hand it choices through `submit` (thread-safe); it hands back each step's
    chunks through `deliver`, which must be thread-safe too (the engine posts them to
    the hub). A choice leaves the step after it finishes or its generation is cancelled.
    """

    def __init__(
        self,
        model: BatchContext,
        settings: BatcherSettings,
        deliver: Callable[[Delivery, StepReport], None],
        draft_model: DraftModel | None = None,
    ) -> None:
        self.model = model
        self.draft_model = draft_model  # speculative decoding with a smaller model, if one is loaded
        self.settings = settings
        self._deliver = deliver
        self._inbox = NativeQueue()
        self.memory = model.memory_kind
        # Cells can be moved (context shift, chunk reuse) where positions shift and no other
        # sequence shares them (a unified cache's cells may belong to several).
        self._moves_cells = self.memory.shifts and not model.shape.unified
        # Checkpoints only where the live cells cannot be cut back to any prefix.
        limit = 0 if self.memory.plain else settings.checkpoints
        self.sequences = [
            Sequence(seq_id, checkpoints=Checkpoints(limit)) for seq_id in range(model.shape.parallel)
        ]
        self._batch = TokenBatch(model.n_batch)
        self._end_tokens = [t for t in range(model.n_vocab) if model.tokenizer.is_end_of_generation(t)]
        self._tick = 0
        self._reused = 0
        self._resumes = [0, 0]  # since the last report: from a checkpoint, in full despite a prefix
        self._drafts_off = False  # for one step, after drafts did not fit the KV cache
        self._cache_report = CacheReport()
        disk = None
        if settings.cache_disk_bytes:
            disk = DiskCache(Path(settings.cache_disk_path), settings.cache_disk_bytes, model.fingerprint)
        self.host_cache = HostCache(settings.cache_ram_bytes, disk) if settings.cache_ram_bytes else None
        # Rows of the routing board: one per sequence, then the host cache's saved states.
        self.board_rows = len(self.sequences) + (PUBLISHED if self.host_cache else 0)
        self.governor = ThreadGovernor(model.shape.n_threads, model.set_threads)
        self.adapter_turns = AdapterTurns(model.set_adapters)
        self.adapter_places = AdapterPlaces(model)
        self.encoder = MediaEncoder(model.encode_media, lambda: self._inbox.put(Wake()))
        self._slot_actions: list[SlotAction] = []  # waiting for their sequence to be idle

    def close(self) -> None:
        """Free the context and weights (and the draft model's), the cells written to the disk tier
        first if there is one; the loop must have stopped."""
        self.persist()
        self.encoder.close()
        if self.draft_model is not None:
            self.draft_model.close()
        self.model.close()

    def persist(self) -> None:
        """Write what the KV cache holds to the disk tier, if there is one (from the batcher's thread)."""
        if self.host_cache is not None and self.host_cache.disk is not None:
            self.host_cache.persist(self.model, self.sequences)
            self.host_cache.disk.close()

    def submit(self, job: Inbox) -> None:
        """Queue a choice, a change of LoRA adapters or a slot action for the next step (from any
        thread); None stops the loop. In order: a choice queued after a change decodes with the
        adapters it made."""
        self._inbox.put(job)

    def run(self) -> None:
        """Step until told to stop; block while there is nothing to do."""
        while self.cycle(wait=True):
            pass

    def cycle(self, wait: bool) -> bool:
        """Admit the choices that have come (idle, wait for one if `wait`), step once, deliver.

        False once told to stop. A failure ends every choice with an error, never the loop.
        """
        delivery: Delivery = []
        try:
            if wait and not self._steppable() and not self._take(self._inbox.get(), delivery):  # GIL released
                return False
            while not self._inbox.empty():
                if not self._take(self._inbox.get(), delivery):
                    return False
            report = self.step(delivery)
            self._slot_actions = slot_actions.run_due(self._slot_actions, self.sequences, self.model)
        except Exception:  # noqa: BLE001 - a failed step must not end the loop or strand a client
            delivery.extend(recovery.fail_all(self.sequences, self.model, traceback.format_exc()))
            report = StepReport(0, 0, 0, 0.0, self.governor.threads)
        blocks = self._cache_report.changes(self.sequences, self.host_cache, self.model)
        in_use = sum(len(s.cached) for s in self.sequences if s.busy)
        (restores, full), self._resumes = self._resumes, [0, 0]
        self.adapter_places.free_unused(self.sequences)
        self._deliver(
            delivery,
            replace(report, restores=restores, full_reprocessing=full, blocks=blocks, cells_in_use=in_use),
        )
        return True

    def _take(self, job: Inbox, delivery: Delivery) -> bool:
        """Admit one choice (False: the loop is told to stop); a choice that cannot start fails alone."""
        if job is None:
            return False
        if isinstance(job, Wake):  # an image came back from the encoder: the next step decodes it
            return True
        if isinstance(job, Persist):  # the worker stops: its cells to disk, for the next server
            self.persist()
            job.done()
            return True
        if isinstance(job, SlotAction):  # done after this cycle's step, once its sequence is idle
            self._slot_actions.append(job)
            return True
        if isinstance(job, AdapterChange):
            self.adapter_places.change(job, self.sequences)
            return True
        try:
            target = self._admit(job)
            if job.plan.progress and target.holding().leader is None:  # it starts from what was cached
                delivery.append((job.generation, target.progress_chunk()))
        except Exception:  # noqa: BLE001 - e.g. a sampler llama.cpp refused to build
            failed = Chunk(finish_reason="error", index=job.plan.index, error=traceback.format_exc())
            delivery.append((job.generation, failed))
        return True

    def _admit(self, job: Job) -> Sequence:
        """Give the choice a sequence, with as much of its prompt as is cached anywhere; that sequence."""
        prompt, runs = job.plan.prompt_tokens, job.plan.media
        # Scoring a prompt needs every one of its tokens evaluated: nothing reused or shared.
        scoring = job.plan.prompt_logprobs
        if runs:
            media.check_prompt(prompt, runs)
            if scoring:
                raise ValueError("prompt log-probabilities are not given for prompts with media")
        # Cells evaluated with other LoRA scales hold other values, and cells of another cache scope
        # another tenant's prompt: neither is ever reused, shared or led.
        adapters, scope = job.plan.adapters or (), job.plan.cache_scope
        missing = [n for n, scale in enumerate(adapters) if scale and not self.model.has_adapter(n)]
        if missing:  # its file failed to load here, though it loaded on the worker that checked it
            raise ValueError(f"the LoRA adapter at index {missing[0]} is not loaded on this worker")
        alike = [s for s in self.sequences if (s.adapters, s.scope) == (adapters, scope)]
        views = [
            scheduling.CacheView(
                s.seq_id,
                s.cached,
                s.last_used,
                not s.busy,
                None if self.memory.cuts_anywhere or s.busy else s.resumable(self.memory, self.model),
                s in alike,
                s.session,
            )
            for s in self.sequences
        ]
        reuse = self.settings.reuse_cache and not scoring
        placement = scheduling.place(
            views, prompt, reuse, self.model.shape.unified, self.memory.plain, lambda n: media.snap(runs, n)
        )
        target = self.sequences[placement.seq_id]
        self._tick += 1
        deadline = time.monotonic() + self.settings.max_seconds if self.settings.max_seconds else float("inf")
        sampler: Sampler = self.model.sampler(job.plan, self._end_tokens)
        if job.plan.thinking_budget is not None:
            sampler = BudgetedSampler(sampler, job.plan.thinking_budget, self.model.tokenizer)
        drafter = draft_step.drafter_for(job.plan, self.settings.drafts, self.draft_model, self.memory)
        leader = None if scoring else shared_prompt.leader_for(alike, prompt)
        if leader is not None:  # it will share the leader's cells once they are evaluated
            target.drop_cache(self.model)
            choice = target.start(job, 0, sampler, deadline, self._tick, drafter)
            choice.pending, choice.leader = choice.pending[:0], leader.seq_id
            return target
        reused = placement.reuse
        if placement.donor is not None:
            target.drop_cache(self.model)
            # Within one unified cache this copies no data, only which sequences own the cells.
            self.model.share(placement.donor, target.seq_id, 0, placement.reuse)
        else:
            host_cache = self.host_cache if reuse else None  # its states are saved under their LoRA scales
            # Runs of the target's own cells are moved only if they are of this request's kind.
            movable = reuse and self._moves_cells and not runs and target in alike
            chunks = self.settings.cache_reuse if movable else 0
            resumed = resumption.resume(
                self.model, target, prompt, reused, placement.shared, host_cache, adapters, chunks, scope
            )
            reused = resumed.tokens
            self._resumes[0] += resumed.from_checkpoint
            self._resumes[1] += resumed.full_reprocessing
        choice = target.start(job, reused, sampler, deadline, self._tick, drafter)
        if target.checkpoints.limit and reuse:
            choice.stops = checkpoint_stops(len(prompt), reused, self.model.n_batch)
        self._reused += reused
        return target

    def _holding(self) -> list[tuple[Sequence, Choice]]:
        """The busy sequences, in id order, each with the choice it holds."""
        return [(s, s.choice) for s in self.sequences if s.choice is not None]

    def step(self, delivery: Delivery) -> StepReport:
        """One batch: every generating sequence's next token plus a budget of prompt tokens.

        Chunks go into `delivery` as they are made, so that none is lost if a later
        part of the step fails.
        """
        self._retire_cancelled(delivery)
        batch = self._batch
        batch.clear()
        holding = self.adapter_turns.pick(self._holding())
        waiting = media_step.evaluate_due(holding, self.model, self.encoder, delivery)
        # Those waiting for an image's encoding sit this step out; some may have ended meanwhile.
        holding = [(s, choice) for s, choice in holding if s.choice is choice and s.seq_id not in waiting]
        generating = {s.seq_id for s, choice in holding if choice.generating and choice.row < 0}
        context_shift.shift_due(holding, generating, self.model)
        prefilling = sorted(((s, c) for s, c in holding if c.prefilling), key=lambda pair: pair[0].last_used)
        room = batch.capacity - len(generating)
        budget = scheduling.prompt_budget(self.settings.prefill_chunk, room, streams_wait=bool(generating))
        shares = dict(scheduling.share_prompt([(s.seq_id, len(c.pending)) for s, c in prefilling], budget))
        room -= sum(shares.values())
        drafted = 0 if self._drafts_off else draft_step.propose(holding, generating, room, self.draft_model)
        self._drafts_off = False
        filled = fill(batch, holding, generating, shares, self.model)
        reused, self._reused = self._reused, 0
        if batch.size == 0:
            return StepReport(self._busy(), 0, reused, 0.0, self.governor.threads)
        clocks = self.governor.start()
        code = self.model.decode(batch)
        seconds = self.governor.clock() - clocks[0]
        if code == 1:
            recovery.undo(holding, filled.taken)
            if drafted:  # the drafts took the room: the next step goes without them
                self._drafts_off = True
            else:
                recovery.make_room(self.sequences, self.model, delivery)
            return StepReport(self._busy(), 0, reused, seconds, self.governor.threads)
        if code != 0:
            raise RuntimeError(f"llama_decode failed with {code}")
        self.governor.finish(clocks)
        sampled, accepted = sampling_step.after_decode(self.sequences, self.model, filled, delivery)
        threads = self.governor.threads
        return StepReport(self._busy(), batch.size, reused, seconds, threads, sampled, drafted, accepted)

    def _busy(self) -> int:
        return sum(1 for s in self.sequences if s.busy)

    def _steppable(self) -> bool:
        """Some choice has work for a step (not all of them wait for the encoder)."""
        return any(s.choice is not None and not s.choice.awaiting_media for s in self.sequences)

    def _retire_cancelled(self, delivery: Delivery) -> None:
        for s, choice in self._holding():
            if choice.job.generation.cancelled:
                delivery.append((choice.job.generation, s.finish("cancelled")))
                shared_prompt.orphan_followers(self.sequences, s)
