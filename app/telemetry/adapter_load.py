"""Which LoRA adapters this worker's requests use, running or waiting, published for vLLM's lora metric.

The inference gateway's LoRA affinity reads `vllm:lora_requests_info` (labels
`running_lora_adapters`, `waiting_lora_adapters`, `max_lora`) to send a request for an
adapter to a pod already running it. Each worker keeps its requests' adapters here and
writes them, as bits over its model's adapters, to its row of the worker board; the
scrape (model_server.py) names them for the whole instance.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from app.telemetry.worker_board import WorkerBoard


class Tracked(Protocol):
    """What is read of a generation: whether a choice holds a sequence yet, and its close hook."""

    started_at: float | None

    def on_close(self, callback: Callable[[], object]) -> None: ...


def adapter_bits(scales: Sequence[float]) -> int:
    """Bit n set for each adapter n applied (a scale other than 0), for the board's 64 bits (an
    index past them, after many loads at run time, goes unshown)."""
    return sum(1 << n for n, scale in enumerate(scales[:64]) if scale != 0.0)


class AdapterLoad:
    """This worker's generations that apply adapters, and their bits on the board."""

    def __init__(self, board: WorkerBoard, seat: int) -> None:
        self._board, self._seat = board, seat
        self._live: dict[int, tuple[Tracked, int]] = {}

    def track(self, generation: Tracked, bits: int) -> None:
        """A generation applying the adapters of `bits`, until it closes."""
        if not bits:
            return
        key = id(generation)
        self._live[key] = (generation, bits)
        generation.on_close(lambda: self._drop(key))
        self.publish()

    def publish(self) -> None:
        """Write the bits of the adapters running (a choice holds a sequence) and waiting."""
        running = waiting = 0
        for generation, bits in self._live.values():
            if generation.started_at is not None:
                running |= bits
            else:
                waiting |= bits
        self._board.record_adapters(self._seat, running, waiting)

    def _drop(self, key: int) -> None:
        if self._live.pop(key, None) is not None:
            self.publish()


_tracker: AdapterLoad | None = None  # this worker's (one per process, set at start-up under gunicorn)


def install(board: WorkerBoard, seat: int) -> None:
    """This worker's tracker, writing to its row `seat` of `board`."""
    global _tracker  # noqa: PLW0603 - one per process, as prometheus_client's registry is
    _tracker = AdapterLoad(board, seat)


def track(
    generation: Tracked, scales: Sequence[float] | None, global_scales: Callable[[], Sequence[float]]
) -> None:
    """A generation submitted with these LoRA scales (None: the worker's `global_scales()`); one that
    applies none is not tracked."""
    if _tracker is not None:
        _tracker.track(generation, adapter_bits(global_scales() if scales is None else scales))


def started(generation: Tracked) -> None:
    """A tracked generation's first choice has a sequence: its adapters run now."""
    if _tracker is not None and id(generation) in _tracker._live:
        _tracker.publish()
