"""The engine's reports turned into metrics, and its load passed on to whoever balances workers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from app.engine.cache.kv_memory import KvMemory
from app.engine.memory import MemoryKind
from app.engine.observer import EngineObserver
from app.telemetry import metrics, standard_names
from app.telemetry.step_tally import StepTally, observe_counts
from app.telemetry.worker_board import WorkerBoard


class EngineFigures(EngineObserver):
    """Records the engine's figures as Prometheus metrics and on the worker board (row `seat`);
    `publish` also hears each load change."""

    def __init__(
        self,
        publish: Callable[[int], object] | None = None,
        ready: Callable[[], object] | None = None,
        board: WorkerBoard | None = None,
        seat: int = 0,
        publish_blocks: Callable[[int, int, list[int]], object] | None = None,
    ) -> None:
        self._publish, self._ready, self._publish_blocks = publish, ready, publish_blocks
        self._board, self._seat = board, seat
        self._busy_threads: tuple[int, int] | None = None  # the gauges' values, set only on a change
        self._steps = StepTally(self._write_steps)

    def loaded(self, seconds: float) -> None:
        metrics.MODEL_LOAD.set(seconds)
        if self._board is not None:
            self._board.record_load_seconds(self._seat, seconds)
        if self._ready is not None:
            self._ready()

    def kv_sized(self, memory: KvMemory) -> None:
        metrics.KV_CACHE_BYTES.set(memory.total_bytes)
        if self._board is not None:
            self._board.record_kv(self._seat, memory.cells, memory.total_bytes)

    def memory_known(self, memory: MemoryKind, checkpoints: int, drafts_off: str) -> None:
        if self._board is not None:
            held = 0 if memory.plain else checkpoints
            self._board.record_memory(self._seat, memory, held, bool(drafts_off))

    def resumed(self, restores: int, full: int) -> None:
        metrics.CHECKPOINT_RESTORES.inc(restores)
        metrics.FULL_REPROCESSING.inc(full)
        if self._board is not None:
            self._board.add_resumes(self._seat, restores, full)

    def kv_in_use(self, cells: int) -> None:
        if self._board is not None:
            self._board.record_kv_in_use(self._seat, cells)

    def drafted(self, drafted: int, accepted: int) -> None:
        metrics.SPEC_DRAFTS.inc()
        metrics.SPEC_DRAFT_TOKENS.inc(drafted)
        metrics.SPEC_ACCEPTED_TOKENS.inc(accepted)
        standard_names.drafted(drafted, accepted)
        if self._board is not None:
            self._board.add_drafts(self._seat, drafted, accepted)

    def cached_blocks(self, seq_id: int, sequences: int, hashes: list[int]) -> None:
        if self._publish_blocks is not None:
            self._publish_blocks(seq_id, sequences, hashes)

    def load_changed(self, admitted: int, running: int, load: int) -> None:
        waiting = max(0, load - running)
        metrics.IN_FLIGHT.set(running)
        metrics.QUEUE_DEPTH.set(waiting)
        if self._board is not None:
            self._board.record_load(self._seat, running, waiting)
        if self._publish is not None:
            self._publish(load)

    def stepped(self, busy: int, decoded: int, reused: int, threads: int, sampled: int) -> None:
        if (busy, threads) != self._busy_threads:
            self._busy_threads = (busy, threads)
            metrics.SEQUENCES_BUSY.set(busy)
            metrics.THREADS.set(threads)
        if reused:
            metrics.CACHED_PROMPT_TOKENS.inc(reused)
        self._steps.add(decoded, sampled, idle=busy == 0)

    def _write_steps(self, sizes: Counter[int], sampled: int) -> None:
        observe_counts(metrics.BATCH_TOKENS, sizes)
        standard_names.decoded(sum(sizes.values()))
        if sampled and self._board is not None:
            self._board.add_tokens(self._seat, sampled)
