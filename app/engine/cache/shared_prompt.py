"""Choices of one request share their prompt: one sequence evaluates it, the others take its cells."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from app.engine.context import BatchContext
from app.engine.sequence import Sequence


def leader_for(sequences: Iterable[Sequence], prompt: list[int]) -> Sequence | None:
    """A sequence already evaluating this very prompt (another choice of the same request).

    Scoring a prompt needs every one of its tokens evaluated by its own sequence: no leader then.
    """
    for s in sequences:
        choice = s.choice
        if choice is not None and choice.prefilling and choice.plan.prompt_tokens == prompt:
            return None if choice.plan.prompt_logprobs else s
    return None


def hand_to_followers(sequences: Iterable[Sequence], model: BatchContext) -> None:
    """Choices waiting on a leader whose prompt was just evaluated share its cells and sample its row."""
    sequences = list(sequences)
    if not any(s.choice is not None and s.choice.leader is not None for s in sequences):
        return  # the common step: nobody waits on a leader
    by_id = {s.seq_id: s for s in sequences}
    for follower in by_id.values():
        choice = follower.choice
        leader = by_id.get(choice.leader) if choice is not None and choice.leader is not None else None
        led = leader.choice if leader is not None else None
        if choice is None or leader is None or led is None:
            continue
        if led.row >= 0 and len(led.pending) == 0 and led.last_token < 0:
            # One pool: the cells get a second owner. Cells per sequence: llama.cpp copies
            # the leader's whole buffer at the next decode (its only way across them).
            span = (0, len(leader.cached)) if model.shape.unified else (-1, -1)
            model.share(leader.seq_id, follower.seq_id, *span)
            follower.cached, choice.leader, choice.row = list(leader.cached), None, led.row
            follower.checkpoints.replace(leader.checkpoints.held)  # states of the same prefix


def orphan_followers(sequences: Iterable[Sequence], gone: Sequence) -> None:
    """Followers of a leader that left before its prompt was evaluated evaluate the prompt themselves."""
    for s in sequences:
        choice = s.choice
        if choice is not None and choice.leader == gone.seq_id:
            choice.leader = None
            choice.pending = np.asarray(choice.plan.prompt_tokens, dtype=np.int32)
