"""Which LoRA adapters requests run and wait with, on the worker board, and vLLM's metric made of them."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, generate_latest

from app.telemetry.adapter_load import AdapterLoad, adapter_bits
from app.telemetry.model_server import ModelServerCollector
from app.telemetry.worker_board import WorkerBoard


class FakeGeneration:
    def __init__(self) -> None:
        self.started_at: float | None = None
        self.closers: list[Callable[[], object]] = []

    def on_close(self, callback: Callable[[], object]) -> None:
        self.closers.append(callback)

    def close(self) -> None:
        for closer in self.closers:
            closer()


def test_bits_are_the_adapters_applied() -> None:
    assert adapter_bits([]) == 0
    assert adapter_bits([0.0, 0.5, 0.0, 1.0]) == 0b1010
    assert adapter_bits([-1.0]) == 1  # a negative scale applies the adapter too


def test_a_generation_waits_then_runs_then_leaves_the_board() -> None:
    board = WorkerBoard(2)
    load = AdapterLoad(board, 1)
    first, second, base = FakeGeneration(), FakeGeneration(), FakeGeneration()
    load.track(first, 0b01)
    load.track(second, 0b10)
    load.track(base, 0)  # the base model: not tracked
    assert board.adapters(1) == (0, 0b11) and board.adapters(0) == (0, 0)
    first.started_at = 1.0
    load.publish()
    assert board.adapters(1) == (0b01, 0b10)
    first.close()
    assert board.adapters(1) == (0, 0b10) and base.closers == []
    second.close()
    assert board.adapters(1) == (0, 0)


def test_the_metric_names_every_workers_adapters_once() -> None:
    board = WorkerBoard(3)
    board.record_adapters(0, running=0b01, waiting=0b10)
    board.record_adapters(2, running=0b11, waiting=0)
    registry = CollectorRegistry()
    registry.register(ModelServerCollector(board, {0: ("a", "b"), 2: ("a", "b")}))
    text = generate_latest(registry).decode()
    (line,) = [line for line in text.splitlines() if line.startswith("vllm:lora_requests_info{")]
    assert (
        'running_lora_adapters="a,b"' in line
        and 'waiting_lora_adapters="b"' in line
        and 'max_lora="2"' in line
    )
    without = CollectorRegistry()
    without.register(ModelServerCollector(board, {0: (), 2: ()}))
    assert "vllm:lora_requests_info" not in generate_latest(without).decode()  # no model has adapters
