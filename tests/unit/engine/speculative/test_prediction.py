"""Predicted outputs' drafter: the prediction drafts where the answer follows it, n-grams elsewhere."""

from __future__ import annotations

from app.engine.speculative.prediction import PredictionDrafter
from app.engine.types import DraftLimits

PREDICTION = list(range(1, 21))


def drafter() -> PredictionDrafter:
    return PredictionDrafter([100, 101, 102], 100, DraftLimits(4), PREDICTION)


def test_the_answer_following_the_prediction_is_drafted_from_it_and_counted() -> None:
    made = drafter()
    assert made.propose(4, 0.0).tolist() == [1, 2, 3, 4]  # before any token: its start
    for token in (1, 2, 3):
        made.push(token)
    draft = made.propose(4, 0.0)
    assert draft.tolist() == [4, 5, 6, 7]
    for token in (4, 5, 99):  # two kept, then the answer leaves the prediction
        made.push(token)
    made.verified(4, 2)
    assert made.prediction_accepted == 2 and made.accepted == 2


def test_after_an_edit_the_draft_resumes_where_the_answer_meets_the_prediction_again() -> None:
    made = drafter()
    for token in (1, 2, 3, 50, 51, 9, 10):  # an edit (50, 51), then the prediction again from 9
        made.push(token)
    assert made.propose(4, 0.0).tolist() == [11, 12, 13, 14]


def test_where_the_prediction_has_nothing_the_choices_own_ngrams_draft() -> None:
    made = PredictionDrafter([7, 8, 9, 60], 100, DraftLimits(4), [1, 2, 3])
    made.push(7)  # nothing of the answer is in the prediction
    made.push(8)
    assert made.propose(2, 0.0).tolist() == [9, 60]  # what followed 7, 8 in the prompt
    made.verified(2, 2)
    assert made.prediction_accepted == 0 and made.accepted == 2
