"""A batcher step's media: each image or audio clip that comes next in a prompt, evaluated whole.

llama.cpp decodes a medium as embeddings, which a batch of tokens cannot carry, and a
projector whose attention over an image is bidirectional (Gemma 3's) needs the image in
one decode: so a run is evaluated on its own, between the steps that carry text, as
llama-server evaluates a slot's image chunk.
"""

from __future__ import annotations

from app.engine import media
from app.engine.context import BatchContext
from app.engine.generation import Delivery
from app.engine.sequence import Choice, Sequence


def evaluate_due(holding: list[tuple[Sequence, Choice]], model: BatchContext, delivery: Delivery) -> int:
    """Evaluate the media run each prefilling choice reaches next; returns the positions evaluated.
    A run the KV cache has no room for ends its choice with `kv_full`."""
    evaluated = 0
    for s, choice in holding:
        if not choice.prefilling or choice.pending[0] >= 0:
            continue
        first = len(s.cached)
        run = media.run_at(choice.request.media, first)
        if run is None:
            raise RuntimeError(f"sequence {s.seq_id}: a media placeholder at {first} starts no run")
        if first in choice.stops:  # the checkpoint this position asked for, before the medium
            s.checkpoint(model)
        code = model.evaluate_media(run, s.seq_id, first)
        if code != 0:
            model.forget(s.seq_id, first, -1)
            reason = "kv_full" if code == 1 else "error"
            why = None if code == 1 else f"llama.cpp could not evaluate an {run.kind} ({code})"
            delivery.append((choice.job.generation, s.finish(reason, error=why)))
            continue
        s.take_prompt(run.length)
        evaluated += run.length
    return evaluated
