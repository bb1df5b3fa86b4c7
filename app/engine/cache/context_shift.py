"""llama-server's context shift: a generation that reaches the context's end drops part of its history.

With LLM_CONTEXT_SHIFT=1, a choice whose sequence would pass its context keeps the first
`n_keep` tokens (+1 for a BOS the model adds; -1: the whole prompt), removes `n_discard` after
them (half of the rest unless asked) from its cells, moves the later cells back by as many
positions (llama_memory_seq_rm, llama_memory_seq_add: their keys are rotated again), and goes
on; as llama-server's `pre_decode` (tools/server/server-context.cpp), at the same moment and
by the same amounts, so the two answer alike. Moved cells hold keys rotated twice, not what a
fresh evaluation of those tokens at those positions gives: their tokens are marked so that no
later prompt resumes past `n_keep`.
"""

from __future__ import annotations

import logging

from app.engine.choice import Choice
from app.engine.context import BatchContext
from app.engine.sequence import Sequence
from app.engine.types import ContextShift

UNMATCHED = -1  # a cached token whose cell was moved: no prompt token equals it
log = logging.getLogger("app.engine.batcher")


def amounts(shift: ContextShift, held: int, prompt: int, n_ctx: int, adds_bos: bool) -> tuple[int, int]:
    """(n_keep, n_discard) for a sequence holding `held` tokens of a `prompt`-token request."""
    n_keep = prompt if shift.n_keep < 0 else shift.n_keep
    n_keep = min(n_ctx - 4, n_keep + (1 if adds_bos else 0))
    n_left = held - n_keep
    n_discard = shift.n_discard or n_left // 2
    return n_keep, max(0, min(n_discard, n_left - 1))


def due(s: Sequence, n_ctx: int) -> bool:
    """The sequence's next token would fill its context (llama-server's `n_tokens + 1 >= n_ctx`)."""
    return len(s.cached) + 1 >= n_ctx


def shift(
    model: BatchContext, s: Sequence, shift: ContextShift, prompt: int, n_ctx: int, adds_bos: bool
) -> None:
    """Drop part of `s`'s history from its cells and move the rest back, as `amounts` says."""
    n_keep, n_discard = amounts(shift, len(s.cached), prompt, n_ctx, adds_bos)
    log.warning("sequence %d: context shift, n_keep = %d, n_discard = %d", s.seq_id, n_keep, n_discard)
    model.forget(s.seq_id, n_keep, n_keep + n_discard)
    model.move(s.seq_id, n_keep + n_discard, -1, -n_discard)
    del s.cached[n_keep : n_keep + n_discard]
    s.cached[n_keep:] = [UNMATCHED] * (len(s.cached) - n_keep)
    s.checkpoints.keep_until(n_keep)


def shift_due(holding: list[tuple[Sequence, Choice]], generating: set[int], model: BatchContext) -> None:
    """Shift the generating sequences whose next token would fill the context, where their request allows."""
    n_ctx = model.shape.n_ctx
    for s, choice in holding:
        plan = choice.plan
        if s.seq_id in generating and plan.shift is not None and due(s, n_ctx):
            shift(model, s, plan.shift, len(plan.prompt_tokens), n_ctx, model.tokenizer.adds_bos)
