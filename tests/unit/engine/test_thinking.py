"""Thinking budgets: the end tag written for a sequence that thinks too long, never for one that does not."""

from __future__ import annotations

from app.engine.sampling.thinking import BudgetedSampler
from app.engine.types import ThinkingBudget

CLOSE = (90, 91)  # the end tag's tokens


class ScriptedSampler:
    """Draws the scripted tokens in order; records what it is told was chosen instead."""

    def __init__(self, tokens: list[int]) -> None:
        self.tokens, self.accepted = list(tokens), list[int]()

    def sample(self, row: int) -> int:
        return self.tokens.pop(0)

    def accept(self, token: int) -> None:
        self.accepted.append(token)

    def allow_end(self) -> None: ...

    def close(self) -> None: ...


class Pieces:
    """Token n is the word `w<n>`; 1 and 2 are the tags."""

    adds_bos = False

    def piece(self, token: int) -> bytes:
        return {1: b"<think>", 2: b"</think>"}.get(token, f"w{token} ".encode())

    def is_end_of_generation(self, token: int) -> bool:
        return False


def run(tokens: list[int], budget: int, opened: bool, steps: int) -> tuple[list[int], list[int]]:
    inner = ScriptedSampler(tokens)
    sampler = BudgetedSampler(inner, ThinkingBudget(budget, "<think>", "</think>", CLOSE, opened), Pieces())
    return [sampler.sample(0) for _ in range(steps)], inner.accepted


def test_a_spent_budget_writes_the_end_tag_and_the_answer_follows() -> None:
    drawn, accepted = run([10, 11, 12, 13, 14, 15], budget=3, opened=True, steps=7)
    assert drawn == [10, 11, 12, *CLOSE, 13, 14] and accepted == list(CLOSE)


def test_the_budget_counts_from_the_opening_tag_the_model_writes() -> None:
    drawn, _ = run([1, 10, 11, 12, 13], budget=2, opened=False, steps=6)
    assert drawn == [1, 10, 11, *CLOSE, 12]


def test_a_model_that_closes_its_thinking_in_time_is_left_alone() -> None:
    drawn, accepted = run([10, 2, 11, 12, 13, 14], budget=3, opened=True, steps=6)
    assert drawn == [10, 2, 11, 12, 13, 14] and accepted == []


def test_a_model_that_answers_without_thinking_is_never_cut() -> None:
    drawn, accepted = run([10, 11, 12, 13, 14], budget=1, opened=False, steps=5)
    assert drawn == [10, 11, 12, 13, 14] and accepted == []


def test_a_budget_of_zero_closes_at_once() -> None:
    drawn, _ = run([10, 11], budget=0, opened=True, steps=3)
    assert drawn == [*CLOSE, 10]
