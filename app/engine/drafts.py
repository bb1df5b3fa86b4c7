"""Speculative decoding's part of a step: which choices draft, and how far, within the batch's room."""

from __future__ import annotations

from app.engine.sequence import Choice, Sequence
from app.engine.speculation import NgramDrafter
from app.engine.types import DraftLimits, GenerationRequest


def drafter_for(request: GenerationRequest, default: DraftLimits | None) -> NgramDrafter | None:
    """The request's own draft limits, else the server's; none for one token, or when off."""
    limits = request.drafts if request.drafts is not None else default
    if limits is None or limits.n_max <= 0 or request.max_tokens < 2:
        return None
    return NgramDrafter(request.prompt_tokens, len(request.prompt_tokens) + request.max_tokens, limits)


def propose(holding: list[tuple[Sequence, Choice]], generating: set[int], room: int) -> int:
    """Drafts for the generating choices that keep a drafter, within `room` batch rows; their total.

    The more sequences share the step, the more a draft row costs beside the tokens it may
    save: with a fixed cost per step about that of a token (as measured on CPUs), drafting
    pays only while a draft token is kept more often than g / (g + 1) of the time, g the
    sequences generating. Each choice drafts only as far as its record says it clears that.
    """
    needed = len(generating) / (len(generating) + 1)
    total = 0
    for s, choice in holding:
        if s.seq_id not in generating or choice.drafter is None or room - total <= 0:
            continue
        # No further than the choice may still generate: one token is sampled besides.
        left = min(room - total, choice.request.max_tokens - choice.count - 1)
        choice.draft = choice.drafter.propose(left, needed) if left > 0 else choice.draft[:0]
        total += len(choice.draft)
    return total
