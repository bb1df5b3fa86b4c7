"""What a decode's logits give: followers' cells, prompt log-probabilities, progress, next tokens."""

from __future__ import annotations

from app.engine.cache import shared_prompt
from app.engine.context import BatchContext
from app.engine.filling import Filled
from app.engine.generation import Delivery
from app.engine.sequence import Sequence


def after_decode(
    sequences: list[Sequence], model: BatchContext, filled: Filled, delivery: Delivery
) -> tuple[int, int]:
    """Followers take their leaders' cells, scored prompts their log-probabilities, and every
    sequence with logits its next tokens; returns (tokens sampled, draft tokens accepted)."""
    shared_prompt.hand_to_followers(sequences, model)
    for s, choice, _ in filled.taken:
        if choice.plan.progress and s.choice is choice:
            delivery.append((choice.job.generation, s.progress_chunk()))
    for s, choice, row, first, size in filled.scored:
        s.note_prompt_rows(model, row, first, size)
        if choice.row >= 0:  # the whole prompt is in: its log-probabilities go first
            delivery.append((choice.job.generation, s.prompt_chunk()))
            if choice.plan.max_tokens == 0:  # scoring only
                delivery.append((choice.job.generation, s.finish("length")))
    sampled = accepted = 0
    for s, choice in [(s, s.choice) for s in sequences if s.choice is not None]:
        if choice.row >= 0 and choice.plan.max_tokens == 0:  # the prompt only (an editor's warm-up)
            delivery.append((choice.job.generation, s.finish("length")))
            shared_prompt.orphan_followers(sequences, s)
        elif choice.row >= 0:
            chunks, drafted = s.sample(model)  # the draft tokens it accepted, each a token sampled
            sampled, accepted = sampled + 1 + drafted, accepted + drafted
            delivery.extend((choice.job.generation, chunk) for chunk in chunks)
            if s.choice is None:
                shared_prompt.orphan_followers(sequences, s)
    return sampled, accepted
