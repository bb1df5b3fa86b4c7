"""Chunk reuse (llama-server's --cache-reuse loop) on the fake context: which runs move, and where."""

from __future__ import annotations

from app.engine.cache.chunk_reuse import reuse
from app.engine.checkpoints import Checkpoints
from app.engine.sequence import Sequence
from tests.unit.engine.fake_context import FakeContext


def cached(tokens: list[int]) -> tuple[FakeContext, Sequence]:
    model = FakeContext(parallel=1, n_ctx=64)
    s = Sequence(0, checkpoints=Checkpoints(0))
    s.cached = list(tokens)
    model.cells[0] = dict(enumerate(tokens))
    return model, s


def test_runs_after_a_deleted_stretch_move_back_to_the_prompts_positions() -> None:
    model, s = cached([1, 2, 3, 50, 51, 52, 10, 11, 12, 13, 14, 60, 20, 21, 22, 23])
    prompt = [1, 2, 3, 10, 11, 12, 13, 14, 20, 21, 22, 23, 99]
    held = reuse(model, s, prompt, n_past=3, min_chunk=4)
    assert held == 12  # the two runs of 5 and 4 moved up behind the shared prefix
    assert s.cached[:held] == prompt[:held]
    assert {p: model.cells[0][p] for p in range(held)} == dict(enumerate(prompt[:held]))


def test_runs_shorter_than_the_minimum_stay_where_they_are() -> None:
    model, s = cached([1, 2, 3, 50, 10, 11, 12, 60, 20, 21])
    prompt = [1, 2, 3, 10, 11, 12, 20, 21, 99]
    assert reuse(model, s, prompt, n_past=3, min_chunk=4) == 3
    assert s.cached == [1, 2, 3, 50, 10, 11, 12, 60, 20, 21]  # untouched: the caller cuts after 3
