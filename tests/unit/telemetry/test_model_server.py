"""The model server protocol's gauges: one series each, summed over the board, as the picker reads them."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from app.telemetry.model_server import ModelServerCollector
from app.telemetry.worker_board import WorkerBoard
from tests.support.picker import read_first_series


def exposition(board: WorkerBoard) -> dict[str, tuple[str, dict[str, str], float]]:
    registry = CollectorRegistry()
    registry.register(ModelServerCollector(board))
    return read_first_series(generate_latest(registry).decode())


def test_every_worker_adds_up_into_one_unlabelled_series() -> None:
    board = WorkerBoard(4)
    board.record_kv(0, 8192, 1)
    board.record_kv(2, 4096, 1)
    board.record_load(0, running=4, waiting=3)
    board.record_load(2, running=1, waiting=0)
    board.record_kv_in_use(0, 1000)
    board.record_kv_in_use(2, 536)
    board.add_drafts(0, 5, 2)  # other figures of the row are left alone
    first = exposition(board)
    assert first["vllm:num_requests_running"] == ("gauge", {}, 5.0)
    assert first["vllm:num_requests_waiting"] == ("gauge", {}, 3.0)
    assert first["llamacpp:requests_processing"] == ("gauge", {}, 5.0)
    assert first["llamacpp:requests_deferred"] == ("gauge", {}, 3.0)
    assert first["vllm:kv_cache_usage_perc"] == ("gauge", {}, 1536 / 12288)
    assert first["vllm:cache_config_info"] == ("gauge", {"block_size": "64", "num_gpu_blocks": "192"}, 1.0)
    assert board.read(0).kv_in_use == 1000 and board.read(0).drafted == 5


def test_a_cleared_row_counts_for_nothing_and_no_model_reads_as_empty() -> None:
    board = WorkerBoard(2)
    first = exposition(board)
    assert first["vllm:kv_cache_usage_perc"][2] == 0.0
    assert first["vllm:cache_config_info"][1]["num_gpu_blocks"] == "0"
    board.record_kv(1, 2048, 1)
    board.record_load(1, running=2, waiting=1)
    board.clear(1)  # the worker exited
    assert exposition(board)["vllm:num_requests_running"][2] == 0.0
