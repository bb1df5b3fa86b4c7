"""Drafting for speculative decoding: a choice's history, its record of drafts accepted, and the n-gram kind.

An answer that repeats its input (a code edit, a rewrite, an extraction, a quote)
writes again what it or its prompt wrote before. The n-gram drafter finds the latest
earlier place where the choice's last few tokens appeared and proposes the tokens that
followed them there; a model drafter has a smaller model write them (draft_model.py).
The batcher verifies the proposal in the same decode as everyone's next token, and
keeps the part the sampler agrees with.

A rejected draft token costs a decode row for nothing, about half a step on a CPU, so
each choice drafts only as far as its record says pays: its draft length grows while
drafts are accepted whole, shrinks to what was accepted, and after drafts that were
refused outright it waits, longer each time, before it drafts again.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from app.engine.types import DraftLimits

NGRAM_SIZES = (4, 3, 2)  # tried longest first: a longer match is the likelier continuation
MAX_PAUSE = 32  # steps a choice may wait after drafts refused in a row
MEMORY = 0.8  # how much of its record a choice keeps at each verdict: recent drafts weigh most
MAX_EXTENT = 48  # tokens a match is followed back at most
LONG_MATCH = 8  # a match this long drafts even while the choice pauses after refusals


class Drafter:
    """One choice's history (prompt, then what it generated) and its drafting record."""

    def __init__(self, prompt: Sequence[int], room: int, limits: DraftLimits) -> None:
        """`room`: the most tokens the history may reach (prompt + completion)."""
        self.limits = limits
        self._tokens = np.zeros(max(room, len(prompt)) + 1, dtype=np.int32)
        self._tokens[: len(prompt)] = prompt
        self._size = len(prompt)
        self.length = min(2, limits.n_max)  # the next draft's length, grown by success
        self._pause = 0  # steps left before the next attempt
        self._refusals = 0  # drafts refused outright, in a row
        self._seen = self._accepted = 0.0  # draft tokens sent and accepted, recent ones weighing most
        self.drafted = self.accepted = 0  # over the choice's life, for the metrics
        self.prediction_accepted = 0  # of those kept, tokens of the request's prediction (prediction.py)

    def push(self, token: int) -> None:
        """A token the choice generated (accepted draft tokens too)."""
        if self._size < len(self._tokens):
            self._tokens[self._size] = token
            self._size += 1

    @property
    def history(self) -> np.ndarray:
        """The prompt and every token generated so far."""
        return self._tokens[: self._size]

    def draft_length(self, room: int, accept_rate_needed: float) -> int:
        """How many tokens to draft this step (0: none; a negative -1: a one-token try only).

        `accept_rate_needed`: the share of draft tokens that must be kept for drafting to
        pay in this step (higher when more sequences share it). A choice drafts no further
        than its own record says will be kept; one whose record does not pay still tries a
        single token now and then (its pauses see to how often).
        """
        if self._pause > 0:
            self._pause -= 1
            return 0
        affordable = self._affordable(accept_rate_needed)
        length = min(room, self.length, max(1, affordable))
        if length < max(1, self.limits.n_min):
            return 0
        return length if affordable else -1

    def verified(self, drafted: int, accepted: int) -> None:
        """The batcher's verdict on the last draft: `accepted` of its `drafted` tokens were accepted."""
        self.drafted += drafted
        self.accepted += accepted
        self._seen = self._seen * MEMORY + drafted
        self._accepted = self._accepted * MEMORY + accepted
        if accepted == drafted:
            self.length, self._refusals = min(self.limits.n_max, self.length * 2), 0
        elif accepted > 0:
            self.length, self._refusals = max(2, accepted), 0
        else:
            self._refusals += 1
            self.length = min(2, self.limits.n_max)
            self._pause = min(MAX_PAUSE, 1 << self._refusals)

    def _rate(self) -> float:
        """The share of draft tokens accepted, recent ones weighing most (one of two to start with)."""
        return (self._accepted + 1.0) / (self._seen + 2.0)

    def _affordable(self, needed: float) -> int:
        """The longest draft whose last token is still likelier to be kept than `needed` (0: none).

        A draft token is kept only if every one before it was; with a rate p per token (this
        choice's recent record, started at one kept of two), the k-th is kept with p**k.
        """
        rate = self._rate()
        if needed <= 0.0:
            return self.limits.n_max
        if rate <= needed:
            return 0
        return max(1, int(np.log(needed) / np.log(rate)))


class NgramDrafter(Drafter):
    """Drafts what followed the earlier place that best matches the choice's last tokens.

    How far back the match runs says how likely its continuation is: text being copied
    matches for dozens of tokens, a chance repeat for two or three. A match of e tokens
    is taken to predict each next token with a chance of e / (e + 2), or the choice's
    record, whichever is higher, and the draft runs as far as that chance pays.
    """

    def propose(self, room: int, accept_rate_needed: float) -> np.ndarray:
        """Up to `room` tokens that may follow the history, or none."""
        paused = self._pause > 0
        self._pause = max(0, self._pause - 1)
        draft, extent = self._lookup(min(room, self.limits.n_max))
        if not len(draft) or (paused and extent < LONG_MATCH):
            return _NONE
        chance = max(self._rate(), extent / (extent + 2))
        if accept_rate_needed <= 0.0:
            length = len(draft)
        elif chance > accept_rate_needed:
            length = max(1, int(np.log(accept_rate_needed) / np.log(chance)))
        else:  # a one-token try, alone, where a whole 4-gram repeats
            length = 1 if accept_rate_needed <= 0.5 and extent >= NGRAM_SIZES[0] else 0
        if length < max(1, self.limits.n_min):
            return _NONE
        return draft[:length]

    def _lookup(self, length: int) -> tuple[np.ndarray, int]:
        """What followed the earlier place whose tokens match the history's end the furthest back
        (the latest of those), and how many tokens match (0: none).

        A match that runs into the history's end continues as a loop of what lies between
        (text repeating itself repeats on).
        """
        tokens, size = self._tokens, self._size
        for n in NGRAM_SIZES:
            if size <= n:
                continue
            # Ends of earlier occurrences of the last token, each followed by at least one token;
            # then, a token further back each time, those that still match.
            ends = np.flatnonzero(tokens[n - 1 : size - 1] == tokens[size - 1]) + (n - 1)
            back = 1
            while len(ends) and back < min(MAX_EXTENT, size):
                matching = ends[
                    (ends >= back) & (tokens[np.maximum(ends - back, 0)] == tokens[size - 1 - back])
                ]
                if len(matching) == 0 and back >= n:
                    break
                ends, back = matching, back + 1
            if len(ends):
                start = int(ends[-1]) + 1
                return tokens[start + np.arange(length) % (size - start)], back
        return _NONE, 0


_NONE = np.zeros(0, dtype=np.int32)
