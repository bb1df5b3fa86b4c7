"""A choice while the batcher holds it: its plan, what is left of its prompt, what it has made."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from app.engine.context import Sampler
from app.engine.generation import Generation
from app.engine.speculative.history import Drafter
from app.engine.text_assembly import TextAssembler
from app.engine.types import ChoicePlan, TokenLogprob


@dataclass(eq=False)
class Job:
    """A choice handed to the batcher: its plan, and the generation whose client waits for it.

    The batcher's thread reads only `generation.cancelled`; the rest of it lives on the hub.
    """

    generation: Generation
    plan: ChoicePlan


NO_DRAFT = np.zeros(0, dtype=np.int32)  # a choice with nothing proposed this step


@dataclass(eq=False)
class Choice:
    """The state of one choice while a sequence holds it: what is left of its prompt, what it made."""

    job: Job
    sampler: Sampler
    deadline: float
    reused: int  # prompt tokens that were already in the KV cache
    pending: np.ndarray  # prompt tokens still to evaluate
    assembler: TextAssembler
    leader: int | None = None  # the sequence id evaluating the same prompt for it (n > 1)
    drafter: Drafter | None = None  # speculative decoding: proposes this choice's next tokens
    draft: np.ndarray = field(default_factory=lambda: NO_DRAFT)  # proposed for this step, after last_token
    last_token: int = -1  # sampled, not yet decoded
    stops: tuple[int, ...] = ()  # prompt positions where a checkpoint is taken before going on
    row: int = -1  # the row of the current batch to sample from, if any
    count: int = 0  # tokens generated
    held_logprobs: list[TokenLogprob] = field(default_factory=list)
    prompt_entries: list[TokenLogprob] = field(default_factory=list)  # prompt_logprobs
    # Media runs (by first position) handed to the encoder, and the embeddings it gave back (None:
    # it failed); the encoder's thread fills `encoded`, the batcher's reads it.
    encoding: set[int] = field(default_factory=set)
    encoded: dict[int, np.ndarray | None] = field(default_factory=dict)
    begun: float = field(default_factory=time.monotonic)  # when it took its sequence
    generating_since: float = 0.0  # when its first token was sampled (monotonic)

    @property
    def plan(self) -> ChoicePlan:
        return self.job.plan

    @property
    def prefilling(self) -> bool:
        return self.leader is None and len(self.pending) > 0

    @property
    def generating(self) -> bool:
        return self.last_token >= 0

    @property
    def awaiting_media(self) -> bool:
        """A medium of its prompt is with the encoder: nothing to do for it until it is back."""
        return any(start not in self.encoded for start in self.encoding)
