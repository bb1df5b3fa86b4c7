"""The engine a worker's views talk to: load the model, admit requests in order, hand chunks back."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import gevent.event

from app.engine import scheduling
from app.engine.batcher import Batcher, Persist
from app.engine.batcher_settings import BatcherSettings, StepReport
from app.engine.cache import cache_report, slot_actions
from app.engine.cache.slot_files import SlotFileError
from app.engine.choice import Job
from app.engine.context import ContextShape
from app.engine.errors import QueueFullError
from app.engine.generation import Delivery, Generation
from app.engine.loading import LoadingEngine
from app.engine.lora import adapter_places
from app.engine.memory import MemoryKind, describe, drafts_off
from app.engine.model import LoadedModel
from app.engine.native_log import Placement
from app.engine.observer import EngineObserver
from app.engine.speculative.draft_model import DraftModel
from app.engine.types import ChoicePlan, DraftLimits
from app.settings.config import Config
from app.settings.models import LoraSpec

log = logging.getLogger(__name__)


def _log_failures(result: gevent.event.AsyncResult) -> None:
    for why in result.value.values():
        log.warning("LoRA adapter not loaded: %s", why)


class Engine(LoadingEngine[LoadedModel]):
    """One model, one context of `parallel` sequences, and a FIFO of requests waiting for one.

    Runs on the hub except for the batcher, which loops in the pool's native thread. A
    choice is handed to the batcher only when a sequence is free for it, so the batcher
    never queues; the hub counts the sequences back in as their last chunks arrive.
    """

    def __init__(
        self, config: Config, observer: EngineObserver | None = None, exit_on_failure: bool = True
    ) -> None:
        super().__init__(config, observer, exit_on_failure)
        self.parallel = config.parallel
        self.admitted = 0  # requests held: generating or waiting
        self._free = config.parallel  # sequences not promised to a choice
        self._waiting: deque[tuple[Generation, ChoicePlan]] = deque()
        self._queued = 0  # requests waiting for their first sequence
        self._batcher: Batcher | None = None
        self._last_load: tuple[int, int, int] | None = None  # as last told to the observer
        self._cells_in_use = 0  # KV cells held by choices, as last told to the observer
        self._low_running: set[Generation] = set()  # low-priority generations holding a sequence
        self._stepping: object = None  # the batcher's loop, once running (an AsyncResult)
        # LoRA: each adapter's global scale (llama-server's POST /lora-adapters sets them).
        self.lora_scales = [lora.scale if lora.loaded else 0.0 for lora in config.model.loras]
        # Each place of the model's adapter list: the file loaded there, or None (empty). Those
        # loaded at run time are loaded once the model is (adopt_adapters), between two steps.
        self._places: list[str | None] = [
            lora.path if lora.loaded and not lora.runtime else None for lora in config.model.loras
        ]
        # The model's adapters as they stand now (the server's, loaded and unloaded at run time):
        # read at each submit, so that every choice decodes with the list its request was planned on.
        self.adapter_list: Callable[[], Sequence[LoraSpec]] | None = None
        self.memory_kind: MemoryKind | None = None  # what the model's memory keeps, once loaded
        self.drafts_off = ""  # why speculative decoding is off for this model, if it is
        self.batch_invariant = False  # its answers do not depend on batching or threads, once loaded
        self.cpu_variant: str | None = None  # CPU kernels a portable build loaded (engine/backends.py)
        self.placement: Placement | None = None  # layers on a GPU, each device's buffers, once loaded

    @property
    def load(self) -> int:
        """Choices holding or waiting for a sequence (what peers compare with `parallel`)."""
        return self.parallel - self._free + len(self._waiting)

    @property
    def has_room(self) -> bool:
        """A new request would start at once."""
        return self._free > 0 and not self._waiting

    def submit(self, plans: list[ChoicePlan], low_priority: bool = False) -> Generation:
        """Admit a request's choices in arrival order, or refuse at once if too many wait already.

        Low priority (batch lines) waits behind every interactive request, and an interactive
        request that would wait takes a sequence back from a running low-priority one. Among
        either kind, a lower `priority` goes first (vLLM's), then arrival.
        """
        must_wait = not self.has_room
        if must_wait and self._queued >= self.config.max_queue:
            raise QueueFullError(
                f"All {self.parallel} sequences of this worker are busy and {self._queued} requests "
                f"wait (LLM_MAX_QUEUE={self.config.max_queue}); retry shortly."
            )
        if self.adapter_list is not None:
            self.adopt_adapters(self.adapter_list())
        plans = [self._with_adapters(plan) for plan in plans]
        generation = Generation(plans, self.release, self.config.sse_keepalive, self.config.queue_timeout)
        generation.low_priority = low_priority
        self.admitted += 1
        if must_wait:
            generation.queued = True
            self._queued += 1
        if must_wait and not low_priority:
            self._preempt(len(plans))
        # Interactive choices ahead of batch lines, then by priority (a request's `priority`, lower
        # first); a running choice is never pre-empted for a higher priority, only batch lines are.
        keys = [(item[0].low_priority, item[1].priority) for item in self._waiting]
        at = scheduling.queue_position(keys, (low_priority, plans[0].priority))
        for offset, plan in enumerate(plans):
            self._waiting.insert(at + offset, (generation, plan))
        self._dispatch()
        return generation

    def _with_adapters(self, plan: ChoicePlan) -> ChoicePlan:
        """The plan with its LoRA scales settled: its own, else the global ones, without trailing
        zeros (adapters loaded since do not change what its cells hold); all 0 is ()."""
        scales = plan.adapters if plan.adapters is not None else tuple(self.lora_scales)
        last = max((n for n, scale in enumerate(scales) if scale), default=-1)
        return replace(plan, adapters=tuple(scales[: last + 1]))

    def adopt_adapters(self, loras: Sequence[LoraSpec]) -> gevent.event.AsyncResult | None:
        """Make the model's adapters those of `loras` (a place loaded or empty as each says), between
        two steps and before any choice submitted after this; None if nothing changes (or the model
        is not loaded yet), else a result that gets {index: why} for each place that failed."""
        places, changes = adapter_places.changed_places(self._places, loras)
        if self._batcher is None or not changes:
            return None
        self._places = places
        self.lora_scales = adapter_places.global_scales(self.lora_scales, loras)
        result: gevent.event.AsyncResult = gevent.event.AsyncResult()

        def done(failed: dict[int, str]) -> None:  # the batcher's thread
            self._hub.loop.run_callback_threadsafe(result.set, failed)

        self._batcher.submit(adapter_places.AdapterChange(changes, done))
        result.rawlink(_log_failures)
        return result

    def slot_action(
        self, action: str, seq_id: int, path: Path | None, scope: str = ""
    ) -> gevent.event.AsyncResult:
        """llama-server's slot `action` (save, restore, erase) on sequence `seq_id`, done between two
        steps once the sequence is idle, for a request of cache `scope`: a result that gets its
        answer fields, or a SlotFileError."""
        result: gevent.event.AsyncResult = gevent.event.AsyncResult()
        if self._batcher is None:
            result.set(SlotFileError("the model is not loaded"))
            return result

        def done(outcome: slot_actions.Outcome) -> None:  # the batcher's thread
            self._hub.loop.run_callback_threadsafe(result.set, outcome)

        self._batcher.submit(slot_actions.SlotAction(action, seq_id, path, self.fingerprint, done, scope))
        return result

    def persist_cache(self, timeout: float) -> bool:
        """Write the KV cache's states to the disk tier, if there is one (the worker stops); False if that
        took longer than `timeout` seconds. Waits cooperatively."""
        batcher = self._batcher
        if batcher is None or batcher.host_cache is None or batcher.host_cache.disk is None:
            return True
        written = gevent.event.Event()
        batcher.submit(Persist(lambda: self._hub.loop.run_callback_threadsafe(written.set)))
        return bool(written.wait(timeout))

    def slots(self, scope: str) -> list[tuple[int, bool, int]]:
        """Each sequence: its id, whether a choice holds it, and the tokens its cells hold (0 if they
        hold another cache scope's: how long another tenant's prompt is is not for it to see)."""
        batcher = self._batcher
        if batcher is None:
            return []
        return [(s.seq_id, s.busy, len(s.cached) if s.scope == scope else 0) for s in batcher.sequences]

    def closest_cached(self, prompt: Sequence[int], scope: str) -> tuple[int, list[int]] | None:
        """Of the prompts this worker's cache holds for cache `scope`, the one sharing most with
        `prompt` (cache_report)."""
        batcher = self._batcher
        if batcher is None:
            return None
        return cache_report.closest(batcher.sequences, batcher.host_cache, prompt, scope)

    def _preempt(self, wanted: int) -> None:
        """Cancel up to `wanted` running low-priority generations, the latest started first: each
        gives its sequence back after its current step, and its runner queues the line again."""
        running = [g for g in self._low_running if not g.cancelled and not g.closed]
        for generation in sorted(running, key=lambda g: g.submitted_at, reverse=True)[:wanted]:
            generation.preempted = True
            generation.cancel()
            log.info("a low-priority (batch) request makes way for an interactive one")

    def release(self, generation: Generation) -> None:
        """A generation was closed: it no longer holds a queue place (its sequences come back as they end)."""
        self.admitted -= 1
        self._low_running.discard(generation)
        if generation.queued:
            generation.queued = False
            self._queued -= 1
        if any(item[0] is generation for item in self._waiting):  # choices that never got a sequence
            self._waiting = deque(item for item in self._waiting if item[0] is not generation)
        self._load_changed()

    def _dispatch(self) -> None:
        """Give free sequences to waiting choices, first come first served."""
        while self._free > 0 and self._waiting and self._batcher is not None:
            generation, plan = self._waiting.popleft()
            if generation.closed or generation.cancelled:
                continue
            self._free -= 1
            if generation.low_priority:
                self._low_running.add(generation)
            if not generation.started:
                if generation.queued:
                    generation.queued = False
                    self._queued -= 1
                generation.mark_started()
            self._batcher.submit(Job(generation, plan))
        self._load_changed()

    def _load_changed(self) -> None:
        # Told only on a change: this runs at every step, and the metrics it sets live in
        # shared memory, work the hub would otherwise take from llama.cpp's threads.
        load = (self.admitted, self.parallel - self._free, self.load)
        if load != self._last_load:
            self._last_load = load
            self.observer.load_changed(*load)

    def _post(self, delivery: Delivery, report: StepReport) -> None:
        """Batcher thread: hand a step's chunks to the hub (the one thread-safe way into it)."""
        self._hub.loop.run_callback_threadsafe(self._on_step, delivery, report)

    def _on_step(self, delivery: Delivery, report: StepReport) -> None:
        for generation, chunk in delivery:
            if chunk.finish_reason is not None:
                self._free += 1
                if chunk.finish_reason == "cancelled":
                    stage = (
                        f"after {chunk.completion_tokens} tokens"
                        if chunk.completion_tokens
                        else ("during prompt processing")
                    )
                    generation.context.run(
                        log.info, "request cancelled by its client %s; its sequence is free", stage
                    )
            generation.push(chunk)
        self._dispatch()
        self.observer.stepped(report.busy, report.decoded, report.reused, report.threads, report.sampled)
        if report.cells_in_use != self._cells_in_use:
            self._cells_in_use = report.cells_in_use
            self.observer.kv_in_use(report.cells_in_use)
        if report.drafted:
            self.observer.drafted(report.drafted, report.accepted)
        if report.restores or report.full_reprocessing:
            self.observer.resumed(report.restores, report.full_reprocessing)
        rows = self._batcher.board_rows if self._batcher is not None else self.parallel
        for row, hashes in report.blocks:
            self.observer.cached_blocks(row, rows, list(hashes))

    def _load(self) -> LoadedModel:
        cfg = self.config
        kv_types = (cfg.cache_type_k, cfg.cache_type_v)
        shape = ContextShape(
            cfg.parallel, cfg.n_ctx, cfg.kv_size, cfg.n_batch, cfg.n_threads, *kv_types, cfg.swa_full,
            cfg.batch_invariant,
        )  # fmt: skip
        loras = tuple(self._places)
        model = LoadedModel(
            cfg.model_path, shape, cfg.n_gpu_layers, cfg.tensor_split, cfg.chat_template, loras, cfg.mmproj
        )
        self.drafts_off = drafts_off(model.memory_kind, cfg.spec_type)
        if self.drafts_off:
            log.warning("speculative decoding is off for %s: %s", cfg.model_id, self.drafts_off)
        draft_model = None
        if cfg.spec_type == "draft" and cfg.spec_draft and not self.drafts_off:
            draft_model = DraftModel(cfg.spec_draft, cfg.parallel, cfg.n_ctx, cfg.n_threads)
            try:
                draft_model.check_vocabulary(model.model)
            except ValueError as exc:
                draft_model.close()
                model.close()
                raise ValueError(f"draft model {cfg.spec_draft}: {exc}") from None
        drafts = DraftLimits(cfg.spec_max) if cfg.spec_type != "none" else None
        settings = BatcherSettings(
            cfg.prefill_chunk,
            cfg.prompt_cache,
            cfg.max_generation_seconds,
            drafts,
            cfg.cache_ram_mb << 20,
            cfg.ctx_checkpoints,
            cfg.cache_disk_mb << 20,
            cfg.cache_disk_path,
            cfg.cache_reuse,
        )
        self._batcher = Batcher(model, settings, self._post, draft_model)
        self.memory_kind, self.batch_invariant = model.memory_kind, model.batch_invariant
        self.cpu_variant, self.placement = model.cpu_variant, model.placement
        return model

    def _stop(self) -> None:
        if self._batcher is not None and self._stepping is not None:
            self._batcher.submit(None)
            self._stepping.get()  # type: ignore[attr-defined]  # gevent's AsyncResult
        projector = self._tokenizer.projector if self._tokenizer is not None else None
        if projector is not None:  # else each unload (a sleep, on demand) would leave its thread
            projector.stop_thread()

    def _free_model(self) -> None:
        assert self._batcher is not None, "loaded"
        self._batcher.close()
        self._batcher = None

    def _loaded_with(self, model: LoadedModel) -> str:
        assert self._batcher is not None, "_load made it, with the model"
        self._stepping = self.pool.spawn(self._batcher.run)  # loops until the model is unloaded
        self.adopt_adapters(self.config.model.loras)  # those loaded at run time, before any request
        self._dispatch()
        kv = model.kv_memory
        self.observer.kv_sized(kv)
        self.observer.memory_known(model.memory_kind, self.config.ctx_checkpoints, self.drafts_off)
        return (
            f"{self.parallel} sequences, {kv.cells} KV cells of {kv.type_k}/{kv.type_v} "
            f"({kv.total_bytes / 2**20:.1f} MiB), {self.config.n_threads} threads, "
            f"memory: {describe(model.memory_kind, self.config.ctx_checkpoints)}"
            + (f", CPU kernels: llama.cpp's {model.cpu_variant} variant" if model.cpu_variant else "")
            + (f", {model.placement.described()}" if model.placement.layers else "")
        )
