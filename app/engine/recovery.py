"""When a step cannot go on: take it back, make room in a full KV cache, or end every choice."""

from __future__ import annotations

import logging

import numpy as np

from app.engine.cache import shared_prompt
from app.engine.choice import Choice
from app.engine.context import BatchContext
from app.engine.generation import Delivery
from app.engine.sequence import Sequence

log = logging.getLogger("app.engine.batcher")


def undo(holding: list[tuple[Sequence, Choice]], taken: list[tuple[Sequence, Choice, np.ndarray]]) -> None:
    """The decode did not happen: take this step's tokens (drafts too) back out of the sequences."""
    for s, choice in holding:
        if choice.generating and choice.row >= 0:
            del s.cached[len(s.cached) - 1 - len(choice.draft) :]
            choice.row, choice.draft = -1, choice.draft[:0]
    for s, choice, tokens in taken:
        del s.cached[len(s.cached) - len(tokens) :]
        choice.pending = np.concatenate([tokens, choice.pending])
        choice.row = -1


def make_room(sequences: list[Sequence], model: BatchContext, delivery: Delivery) -> None:
    """The KV cache is full: drop idle sequences' caches, or else end the largest choice."""
    idle = [s for s in sequences if not s.busy and s.cached]
    for s in idle:
        s.drop_cache(model)
    if idle:
        return
    holding = [(s, s.choice) for s in sequences if s.choice is not None]
    if not holding:
        return
    victim, choice = max(holding, key=lambda pair: len(pair[0].cached))
    log.warning("the KV cache is full: ending one choice of %d tokens to make room", len(victim.cached))
    delivery.append((choice.job.generation, victim.finish("kv_full")))
    shared_prompt.orphan_followers(sequences, victim)
    victim.drop_cache(model)


def fail_all(sequences: list[Sequence], model: BatchContext, error: str) -> Delivery:
    """After an unexpected failure: end every choice with an error and start from a clean cache."""
    delivery = [(s.choice.job.generation, s.finish("error", error=error)) for s in sequences if s.choice]
    model.clear()
    for s in sequences:
        s.cached = []
        s.checkpoints.clear()
    return delivery
