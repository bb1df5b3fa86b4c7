"""A batcher step's media: each image or audio clip that comes next in a prompt, encoded aside and
evaluated whole.

llama.cpp decodes a medium as embeddings, which a batch of tokens cannot carry, and a
projector whose attention over an image is bidirectional (Gemma 3's) needs the image in
one decode: so a run's embeddings are decoded on their own, between the steps that carry
text. They are made first by the media encoder's thread (media_encoder.py), while the
choice waits and the others step on.
"""

from __future__ import annotations

import numpy as np

from app.engine import media
from app.engine.choice import Choice
from app.engine.context import BatchContext
from app.engine.generation import Delivery
from app.engine.multimodal.media_encoder import Encoded, MediaEncoder
from app.engine.sequence import Sequence


def evaluate_due(
    holding: list[tuple[Sequence, Choice]], model: BatchContext, encoder: MediaEncoder, delivery: Delivery
) -> set[int]:
    """Decode the media runs each prefilling choice has reached, once encoded; send one to the encoder
    if it is not. Returns the sequences that wait for an encoding (they sit this step out). A run the
    KV cache has no room for ends its choice with `kv_full`, one that failed to encode with `error`."""
    waiting: set[int] = set()
    for s, choice in holding:
        # Runs can follow each other (a long clip is one per 30 seconds): text comes only after them.
        while s.choice is choice and choice.prefilling and choice.pending[0] < 0:
            if not _evaluate(s, choice, model, encoder, delivery):
                waiting.add(s.seq_id)
                break
    return waiting


def _evaluate(
    s: Sequence, choice: Choice, model: BatchContext, encoder: MediaEncoder, delivery: Delivery
) -> bool:
    """Evaluate the run at the choice's next position, or end the choice if it cannot be; False if the
    run is not encoded yet (sent to the encoder if it was not)."""
    first = len(s.cached)
    run = media.run_at(choice.plan.media, first)
    if run is None:
        raise RuntimeError(f"sequence {s.seq_id}: a media placeholder at {first} starts no run")
    if first not in choice.encoded:
        if first not in choice.encoding:
            choice.encoding.add(first)
            encoder.submit(run, _receiver(choice, first))
        return False
    choice.encoding.discard(first)
    embeddings = choice.encoded.pop(first)
    if embeddings is None:
        delivery.append(
            (choice.job.generation, s.finish("error", error=f"llama.cpp could not encode an {run.kind}"))
        )
        return True
    if first in choice.stops:  # the checkpoint this position asked for, before the medium
        s.checkpoint(model)
    code = model.decode_media(run, embeddings, s.seq_id, first)
    if code != 0:
        model.forget(s.seq_id, first, -1)
        reason = "kv_full" if code == 1 else "error"
        why = None if code == 1 else f"llama.cpp could not evaluate an {run.kind} ({code})"
        delivery.append((choice.job.generation, s.finish(reason, error=why)))
        return True
    s.take_prompt(run.length)
    return True


def _receiver(choice: Choice, start: int) -> Encoded:
    """Where the encoder's thread leaves the embeddings of the run at `start`."""

    def receive(embeddings: np.ndarray | None) -> None:
        choice.encoded[start] = embeddings

    return receive
