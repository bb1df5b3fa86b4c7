"""Images and audio in a prompt: where each sits among its tokens, and the ids that stand for them.

A multimodal prompt is text tokens with media runs between them (llama.cpp's mtmd chunks).
Each run takes as many positions as the projector makes embeddings of it; the prompt's token
list holds one placeholder id per position, negative so that no vocabulary token equals it,
and derived from the medium's content hash: the prompt cache, the host cache and cache-aware
routing compare prompts by token, so the same image matches itself and a different image
never does. The placeholders are never decoded as tokens; the batcher evaluates a run whole.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


def placeholder(content: bytes) -> int:
    """The id every position of a medium with this content holds: negative, never -1 (llama.cpp's
    'no token'), the same for the same bytes in every process."""
    digest = int.from_bytes(hashlib.blake2b(content, digest_size=8).digest(), "little")
    return -2 - digest % (2**31 - 3)


@dataclass(frozen=True, eq=False)
class MediaRun:
    """One image or audio clip of a prompt: its first position, how many it takes, and the chunk
    the projector evaluates (an opaque handle, freed with the run)."""

    start: int
    length: int
    kind: str  # "image" or "audio"
    placeholder: int
    chunk: Any = field(repr=False)

    @property
    def end(self) -> int:
        return self.start + self.length


def snap(runs: Sequence[MediaRun], prefix: int) -> int:
    """The longest resumable prefix no longer than `prefix` that does not end inside a run: a
    run's embeddings are evaluated whole, so a cache cut inside one resumes at its start."""
    for run in runs:
        if run.start < prefix < run.end:
            return run.start
    return prefix


def run_at(runs: Sequence[MediaRun], position: int) -> MediaRun | None:
    """The run that starts at `position`, if one does."""
    for run in runs:
        if run.start == position:
            return run
    return None


def starts(runs: Sequence[MediaRun]) -> list[int]:
    return [run.start for run in runs]


def check_prompt(prompt: Sequence[int], runs: Sequence[MediaRun]) -> None:
    """A prompt and its runs agree: each run's positions hold its placeholder, text positions hold
    vocabulary ids, and text follows the last run (the last position's logits come from a token)."""
    media = {p for run in runs for p in range(run.start, run.end)}
    for run in runs:
        if any(prompt[p] != run.placeholder for p in range(run.start, run.end)):
            raise ValueError("a media run's positions do not hold its placeholder")
    if any(token < 0 for n, token in enumerate(prompt) if n not in media):
        raise ValueError("a negative token id outside any media run")
    if runs and runs[-1].end >= len(prompt):
        raise ValueError("a prompt must not end with an image or audio clip")
