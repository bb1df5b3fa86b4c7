"""A thinking budget: once a sequence has thought for its budget, its end tag is written for it."""

from __future__ import annotations

from app.engine.context import Pieces, Sampler
from app.engine.types import ThinkingBudget


class BudgetedSampler:
    """A sampler that counts the tokens a sequence thinks for, and closes the thinking when they run out.

    The thinking starts with the answer (its opening tag written by the model, or already in
    the prompt) and ends at the closing tag. While it has budget, tokens are drawn as usual;
    after that, the closing tag's tokens are written one per step, each recorded by the
    sampler as if drawn, and the answer follows from there. A model that answers without
    thinking is never cut.
    """

    def __init__(self, inner: Sampler, budget: ThinkingBudget, pieces: Pieces) -> None:
        self.inner, self.budget, self.pieces = inner, budget, pieces
        self.thinking: bool | None = True if budget.opened else None  # None: not known yet
        self.spent = 0
        self.text = ""
        self.forced: list[int] = []

    def sample(self, row: int) -> int:
        if not self.forced and self.thinking and self.spent >= self.budget.tokens:
            self.forced, self.thinking = list(self.budget.closing_tokens), False
        if self.forced:
            token = self.forced.pop(0)
            self.inner.accept(token)
            return token
        token = self.inner.sample(row)
        self._observe(token)
        return token

    def _observe(self, token: int) -> None:
        if self.thinking is False:
            return
        self.text += self.pieces.piece(token).decode("utf-8", errors="replace")
        if self.thinking is None:
            started = self.text.lstrip()
            if started.startswith(self.budget.opening):
                self.thinking, self.text = True, started[len(self.budget.opening) :]
            elif not self.budget.opening.startswith(started):
                self.thinking = False  # it answers without thinking
            return
        self.spent += 1
        if self.budget.closing in self.text:
            self.thinking = False  # it closed the thinking by itself
        self.text = self.text[-len(self.budget.closing) :]  # enough to see the tag arrive

    def accept(self, token: int) -> None:
        self.inner.accept(token)

    def allow_end(self) -> None:
        self.inner.allow_end()

    def close(self) -> None:
        self.inner.close()
