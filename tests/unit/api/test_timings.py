"""llama-server's `timings` (app/api/generation/timings.py) and where the completion stream puts it."""

from __future__ import annotations

import json
import time

import pytest

from app.api.chat.objects import ObjectHeader
from app.api.chat.presenter import CompletionOptions, CompletionPresenter
from app.api.generation import timings
from app.engine.types import Chunk
from app.telemetry.request_stats import RequestStats


def test_the_figures_are_llama_servers() -> None:
    figures = timings.figures(
        evaluated=100, cached=20, predicted=10, prompt_seconds=0.5, predicted_seconds=0.25
    )
    assert figures == {
        "cache_n": 20,
        "prompt_n": 100, "prompt_ms": 500.0, "prompt_per_token_ms": 5.0, "prompt_per_second": 200.0,
        "predicted_n": 10, "predicted_ms": 250.0, "predicted_per_token_ms": 25.0,
        "predicted_per_second": 40.0,
    }  # fmt: skip
    nothing = timings.figures(0, 0, 0, 0.0, 0.0)
    assert nothing["prompt_per_second"] == nothing["predicted_per_token_ms"] == 0.0


def test_the_prompt_is_timed_from_the_first_sequence_to_the_first_token() -> None:
    now = time.monotonic()
    stats = RequestStats(started=now - 3.0, sequence_at=now - 2.5, ttft=1.5, cached_tokens=4)
    stats.count_tokens(0, 7)
    figures = timings.of_request(12, stats)
    assert figures["prompt_ms"] == pytest.approx(1000, abs=1)  # queued 0.5 s: not evaluating
    assert figures["predicted_ms"] == pytest.approx(1500, abs=50)
    assert (figures["cache_n"], figures["prompt_n"], figures["predicted_n"]) == (4, 8, 7)


@pytest.mark.parametrize(("include_usage", "per_token"), [(False, False), (True, False), (False, True)])
def test_the_stream_times_its_last_chunk_or_every_one(include_usage: bool, per_token: bool) -> None:
    options = CompletionOptions(
        chat=True, prompt_tokens=5, include_usage=include_usage, timings_per_token=per_token
    )
    presenter = CompletionPresenter(ObjectHeader("m", chat=True), options, wants_logprobs=False)
    chunks = [Chunk("Hel", completion_tokens=1), Chunk("lo", "stop", completion_tokens=2)]
    events = [json.loads(e[6:]) for e in presenter.events(iter(chunks)) if e.startswith(b"data: {")]
    timed = [i for i, event in enumerate(events) if "timings" in event]
    # Per token: every chunk but the opening one, which says the role (as llama-server's).
    assert timed == (list(range(1, len(events))) if per_token else [len(events) - 1])
    assert events[-1]["timings"]["predicted_n"] == 0  # no request here: nothing counted
    whole = presenter.build([])
    assert set(whole["timings"]) == set(timings.figures(0, 0, 0, 0, 0))
