"""Predicted outputs (OpenAI's `prediction`): the client's guess at the answer drafts it.

For an edit the client already knows most of the answer, so the prediction is the best
draft there is: the answer's start is drafted from the prediction's start, and after each
step the draft goes on from where the answer's last tokens are found in the prediction
(after the place matched before, so a repeated line does not send it back). Where the
answer leaves the prediction (the edited part), the choice's own n-grams draft as usual
until it meets the prediction again. The verification is the batcher's: at temperature 0
the answer is the one plain decoding gives.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from app.engine.speculative.history import MAX_EXTENT, NGRAM_SIZES, NgramDrafter
from app.engine.types import DraftLimits

# A match into the prediction counts as this long when the answer starts: nothing generated
# yet, and the prediction is the client's word for how it begins.
START_EXTENT = 16


class PredictionDrafter(NgramDrafter):
    """N-gram drafting that looks in the prediction first; counts the prediction's tokens kept."""

    def __init__(
        self, prompt: Sequence[int], room: int, limits: DraftLimits, prediction: Sequence[int]
    ) -> None:
        super().__init__(prompt, room, limits)
        self._prompt_size = len(prompt)
        self._prediction = np.asarray(prediction, dtype=np.int32)
        self._cursor = 0  # where in the prediction the answer was last found to be
        self._from_prediction = False  # whether the last proposal came from it

    def verified(self, drafted: int, accepted: int) -> None:
        super().verified(drafted, accepted)
        if self._from_prediction:
            self.prediction_accepted += accepted
            self._cursor += accepted

    def _lookup(self, length: int) -> tuple[np.ndarray, int]:
        found = self._in_prediction(length)
        self._from_prediction = found is not None
        return found if found is not None else super()._lookup(length)

    def _in_prediction(self, length: int) -> tuple[np.ndarray, int] | None:
        """The prediction's tokens after the answer's last ones, and how far back they match."""
        answer = self.history[self._prompt_size :]
        prediction = self._prediction
        if len(answer) == 0:
            return (prediction[:length], START_EXTENT) if len(prediction) else None
        for n in NGRAM_SIZES + (1,):
            if len(answer) < n or len(prediction) <= n:
                continue
            tail = answer[-n:]
            windows = np.lib.stride_tricks.sliding_window_view(prediction[:-1], n)
            ends = np.flatnonzero((windows == tail).all(axis=1)) + n  # the token after each match
            if not len(ends):
                continue
            later = ends[ends >= self._cursor]
            end = int(later[0] if len(later) else ends[-1])
            self._cursor = end
            return prediction[end : end + length], _extent(answer, prediction, end, n)
        return None


def _extent(answer: np.ndarray, prediction: np.ndarray, end: int, matched: int) -> int:
    """How many of the answer's last tokens the prediction holds just before `end` (at most
    MAX_EXTENT): a long run is text being copied, whose next token is the likeliest to be kept."""
    extent = matched
    while extent < min(len(answer), end, MAX_EXTENT) and prediction[end - extent - 1] == answer[-extent - 1]:
        extent += 1
    return extent
