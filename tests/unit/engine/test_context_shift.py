"""Context shift's amounts (llama-server's formula) and what a shift does to a sequence's cells."""

from __future__ import annotations

from app.engine.cache import context_shift
from app.engine.cache.context_shift import UNMATCHED, amounts
from app.engine.checkpoints import Checkpoints
from app.engine.sequence import Sequence
from app.engine.types import ContextShift
from tests.unit.engine.fake_context import FakeContext


def test_amounts_follow_llama_servers_formula() -> None:
    assert amounts(ContextShift(8, 0), held=255, prompt=23, n_ctx=256, adds_bos=False) == (8, 123)
    assert amounts(ContextShift(8, 0), held=255, prompt=23, n_ctx=256, adds_bos=True) == (9, 123)
    assert amounts(ContextShift(-1, 40), held=255, prompt=23, n_ctx=256, adds_bos=False) == (23, 40)
    # n_keep at most n_ctx - 4, n_discard at most what is left less one.
    assert amounts(ContextShift(1000, 0), held=255, prompt=23, n_ctx=256, adds_bos=False) == (252, 1)
    assert amounts(ContextShift(0, 500), held=255, prompt=23, n_ctx=256, adds_bos=False) == (0, 254)


def test_a_shift_drops_cells_moves_the_rest_and_marks_them_unmatched() -> None:
    model = FakeContext(parallel=1, n_ctx=16)
    s = Sequence(0, checkpoints=Checkpoints(0))
    s.cached = list(range(100, 115))  # 15 tokens: the next one would fill the context
    model.cells[0] = {p: t for p, t in enumerate(s.cached)}
    assert context_shift.due(s, 16)
    context_shift.shift(model, s, ContextShift(4, 0), prompt=6, n_ctx=16, adds_bos=False)
    assert s.cached == [100, 101, 102, 103] + [UNMATCHED] * 6  # 5 dropped (half of 11), 6 moved back
    assert model.cells[0] == {p: t for p, t in enumerate([100, 101, 102, 103, 109, 110, 111, 112, 113, 114])}
    assert not context_shift.due(s, 16)
