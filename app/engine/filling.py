"""Filling one batch: each generating sequence's next token and draft, then its share of prompt chunks."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from app.engine import media, scheduling
from app.engine.batch import TokenBatch
from app.engine.choice import Choice
from app.engine.context import BatchContext
from app.engine.sequence import Sequence


@dataclass
class Filled:
    """What a filled batch holds beyond its tokens: what to undo if the decode fails, what to score."""

    taken: list[tuple[Sequence, Choice, np.ndarray]] = field(default_factory=list)  # prompt chunks
    scored: list[tuple[Sequence, Choice, int, int, int]] = field(default_factory=list)  # row, position, size


def fill(
    batch: TokenBatch,
    holding: list[tuple[Sequence, Choice]],
    generating: set[int],
    shares: dict[int, int],
    model: BatchContext,
) -> Filled:
    """Add every holder's tokens to `batch`, in sequence id order.

    With cells per sequence, llama.cpp runs one graph per run of consecutive sequence
    ids, so a prompt chunk goes between its neighbours.
    """
    filled = Filled()
    for s, choice in holding:
        if s.seq_id in generating:
            _add_next_token(batch, s, choice)
        elif s.seq_id in shares:
            _add_prompt_chunk(batch, s, choice, shares[s.seq_id], model, filled)
    return filled


def _add_next_token(batch: TokenBatch, s: Sequence, choice: Choice) -> None:
    """Its next token, then its draft, logits on for each."""
    choice.row = batch.add(choice.last_token, len(s.cached), s.seq_id, True)
    s.cached.append(choice.last_token)
    if len(choice.draft):
        batch.add_run(choice.draft, len(s.cached), s.seq_id, True, logits_all=True)
        s.cached.extend(choice.draft.tolist())


def _add_prompt_chunk(
    batch: TokenBatch, s: Sequence, choice: Choice, share: int, model: BatchContext, filled: Filled
) -> None:
    """Up to `share` of its prompt, stopping at a checkpoint's point; logits where it ends (or all)."""
    first, row = len(s.cached), batch.size
    if first in choice.stops:  # the cells hold the prompt up to here: keep what cannot be cut
        s.checkpoint(model)
    # A chunk ends where a checkpoint is taken or a medium starts (the batcher evaluates media whole).
    pauses = [*choice.stops, *media.starts(choice.plan.media)]
    tokens = s.take_prompt(scheduling.chunk_size(share, [p - first for p in pauses]))
    every = choice.plan.prompt_logprobs
    done = len(choice.pending) == 0
    last = batch.add_run(tokens, first, s.seq_id, logits_last=done, logits_all=every)
    filled.taken.append((s, choice, tokens))
    if every:
        filled.scored.append((s, choice, row, first, len(tokens)))
    if done:
        choice.row = last
