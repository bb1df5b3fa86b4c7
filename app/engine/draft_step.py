"""Speculative decoding's part of a step: which choices draft, and how far, within the batch's room."""

from __future__ import annotations

import logging

import numpy as np

from app.engine.choice import Choice
from app.engine.memory import MemoryKind
from app.engine.sequence import Sequence
from app.engine.speculative.draft_model import DraftModel, ModelDrafter
from app.engine.speculative.history import Drafter, NgramDrafter
from app.engine.speculative.prediction import PredictionDrafter
from app.engine.types import ChoicePlan, DraftLimits

log = logging.getLogger("app.engine.batcher")

PREDICTION_LIMITS = DraftLimits(16)  # a prediction's drafts when the server drafts none of its own


def drafter_for(
    plan: ChoicePlan,
    default: DraftLimits | None,
    draft_model: DraftModel | None,
    memory: MemoryKind,
) -> Drafter | None:
    """The request's own draft limits, else the server's; none for one token, or when off, or on a
    memory that cannot drop refused draft tokens (a recurrent state), for a prompt with media, or
    for a choice whose context may shift (drafts would pass its end).
    With a draft model loaded, it drafts; else the choice's own n-grams do."""
    limits = plan.drafts if plan.drafts is not None else default
    if plan.prediction and (limits is None or limits.n_max <= 0):
        limits = PREDICTION_LIMITS  # asked for by the request itself, whatever the server's setting
    # Drafts come from the prompt's tokens (n-grams, or a draft model reading them): media have none.
    if (
        limits is None
        or limits.n_max <= 0
        or plan.max_tokens < 2
        or not memory.rolls_back
        or plan.media
        or plan.shift is not None
    ):
        return None
    room = len(plan.prompt_tokens) + plan.max_tokens
    if plan.prediction:  # the client's guess drafts before any model or n-gram could
        return PredictionDrafter(plan.prompt_tokens, room, limits, plan.prediction)
    kind = ModelDrafter if draft_model is not None else NgramDrafter
    return kind(plan.prompt_tokens, room, limits)


def propose(
    holding: list[tuple[Sequence, Choice]], generating: set[int], room: int, draft_model: DraftModel | None
) -> int:
    """Drafts for the generating choices that keep a drafter, within `room` batch rows; their total.

    The more sequences share the step, the more a draft row costs beside the tokens it may
    save: with a fixed cost per step about that of a token (as measured on CPUs), drafting
    pays only while a draft token is kept more often than g / (g + 1) of the time, g the
    sequences generating. Each choice drafts only as far as its record says it clears that.
    """
    needed = len(generating) / (len(generating) + 1)
    total = 0
    wanted: list[
        tuple[int, np.ndarray, int, str]
    ] = []  # the draft model's work: sequence, history, length, scope
    for s, choice in holding:
        drafter = choice.drafter
        if s.seq_id not in generating or drafter is None or room - total <= 0:
            continue
        # No further than the choice may still generate: one token is sampled besides.
        left = min(room - total, choice.plan.max_tokens - choice.count - 1)
        if left <= 0:
            continue
        if isinstance(drafter, NgramDrafter):
            choice.draft = drafter.propose(left, needed)
            total += len(choice.draft)
        elif length := abs(drafter.draft_length(left, needed)):
            wanted.append((s.seq_id, drafter.history, length, s.scope))
            total += length
    if wanted and draft_model is not None:
        try:
            made = draft_model.draft(wanted)
        except RuntimeError:  # drafts are a shortcut: without them the step goes on as plain decoding
            log.exception("the draft model failed; this step goes without drafts")
            return total - sum(length for _, _, length, _ in wanted)
        for s, choice in holding:
            if s.seq_id in made:
                choice.draft = made[s.seq_id]
    return total
