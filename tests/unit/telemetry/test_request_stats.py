"""A request's token counts over a loop of generations (the MCP tools' steps)."""

from __future__ import annotations

from app.telemetry.request_stats import RequestStats


def test_each_steps_prompt_and_tokens_add_up() -> None:
    stats = RequestStats()
    stats.next_step(100)
    for running in (1, 2, 3):  # chunks carry running counts
        stats.count_tokens(0, running)
    stats.next_step(120)  # the prompt again, with the call and its result
    for running in (1, 2):
        stats.count_tokens(0, running)
    assert (stats.prompt_tokens, stats.completion_tokens) == (220, 5)


def test_one_generation_counts_its_choices_as_before() -> None:
    stats = RequestStats(prompt_tokens=7)
    stats.count_tokens(0, 4)
    stats.count_tokens(1, 2)
    stats.count_tokens(0, 3)  # a late, lower running count changes nothing
    assert (stats.prompt_tokens, stats.completion_tokens, stats.longest_choice) == (7, 6, 4)
