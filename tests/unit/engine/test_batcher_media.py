"""Media in the batcher's step, on the counting fake: a run evaluated whole between text chunks, its
placeholders compared as tokens by the cache, and a cached prefix never resumed inside one."""

from __future__ import annotations

import pytest

from app.engine import media, scheduling
from app.engine.batcher_settings import BatcherSettings
from app.engine.media import MediaRun
from app.engine.types import DraftLimits
from tests.unit.engine.fake_context import FakeContext, job
from tests.unit.engine.test_batcher import Run

IMAGE_A, IMAGE_B = media.placeholder(b"a"), media.placeholder(b"b")


def with_image(before: list[int], mark: int, length: int, after: list[int]) -> tuple[list[int], MediaRun]:
    """A prompt of text, an image of `length` positions, text; and the image's run."""
    run = MediaRun(len(before), length, "image", mark, chunk=None)
    return [*before, *[mark] * length, *after], run


def test_placeholders_are_negative_never_minus_one_and_depend_on_the_content() -> None:
    assert IMAGE_A < -1 and IMAGE_B < -1 and IMAGE_A != IMAGE_B
    assert media.placeholder(b"a") == IMAGE_A


def test_an_image_is_evaluated_whole_between_its_texts_while_another_stream_generates() -> None:
    run = Run(FakeContext(parallel=2), prefill_chunk=16)
    streaming = job([1, 2], max_tokens=8)
    run.submit(streaming)
    run.step(2)
    prompt, image = with_image([10, 11], IMAGE_A, 5, [12, 13])
    asking = job(prompt, max_tokens=3, media=(image,))
    run.submit(asking)
    run.until_idle()
    assert run.context.media_evaluated == [(1, 2, 5)]
    decoded = [[(r.seq_id, r.token) for r in rows] for rows in run.context.decodes]
    # No placeholder ever reaches a token batch; the text before the image and after it does.
    assert all(token >= 0 for rows in decoded for _, token in rows)
    mine = [token for rows in decoded for seq, token in rows if seq == 1]
    assert mine[:4] == [10, 11, 12, 13]
    assert run.text(asking) == "<14><15><16>"
    # The stream beside it took a token in every step, the image's included.
    assert run.text(streaming) == "".join(f"<{t}>" for t in range(3, 11))
    assert [run.context.cells[1][p] for p in range(2, 7)] == [IMAGE_A] * 5


def test_runs_that_follow_each_other_are_evaluated_before_any_text() -> None:
    """A long audio clip is one run per 30-second window, back to back: no placeholder of the
    second may go into a token batch after the first is evaluated."""
    run = Run(FakeContext(parallel=1), prefill_chunk=16)
    first = MediaRun(2, 3, "audio", IMAGE_A, chunk=None)
    second = MediaRun(5, 3, "audio", IMAGE_B, chunk=None)
    prompt = [10, 11, *[IMAGE_A] * 3, *[IMAGE_B] * 3, 12, 13]
    clip = job(prompt, max_tokens=2, media=(first, second))
    run.submit(clip)
    run.until_idle()
    assert run.context.media_evaluated == [(0, 2, 3), (0, 5, 3)]
    assert all(row.token >= 0 for rows in run.context.decodes for row in rows)
    assert run.text(clip) == "<14><15>"


def test_the_same_image_again_resumes_past_it_and_another_image_stops_the_cache_at_its_start() -> None:
    run = Run(FakeContext(parallel=1))
    prompt, image = with_image([10, 11], IMAGE_A, 4, [12, 13])
    first = job(prompt, max_tokens=2, media=(image,))
    run.submit(first)
    run.until_idle()
    again = job([*prompt, 14, 15, 16], max_tokens=1, media=(image,))
    run.submit(again)
    run.until_idle()
    assert run.ending(again).cached_tokens == len(prompt) + 1  # and the first answer's decoded token
    assert run.context.media_evaluated == [(0, 2, 4)]
    other, image_b = with_image([10, 11], IMAGE_B, 4, [12, 13])
    third = job(other, max_tokens=1, media=(image_b,))
    run.submit(third)
    run.until_idle()
    assert run.ending(third).cached_tokens == 2
    assert run.context.media_evaluated[-1] == (0, 2, 4)


def test_a_cached_prefix_ending_inside_an_image_resumes_at_the_image_start() -> None:
    prompt, image = with_image([10, 11], IMAGE_A, 4, [12, 13])
    cached = prompt[:4]  # the text and half the image's placeholders (a cut back, say)
    views = [scheduling.CacheView(0, cached, 0, True)]
    placement = scheduling.place(views, prompt, True, False, cut=lambda n: media.snap([image], n))
    assert placement.reuse == 2
    assert scheduling.place(views, prompt, True, False).reuse == 4  # without the cut: inside it


def test_an_image_the_kv_cache_has_no_room_for_ends_its_choice_with_kv_full() -> None:
    context = FakeContext(parallel=1, media_full=1)
    run = Run(context)
    prompt, image = with_image([10], IMAGE_A, 3, [12])
    asking = job(prompt, max_tokens=2, media=(image,))
    run.submit(asking)
    run.until_idle()
    assert run.ending(asking).finish_reason == "kv_full"
    assert not any(s.busy for s in run.batcher.sequences)


def test_a_prompt_with_media_drafts_nothing_and_ending_with_an_image_is_refused() -> None:
    context = FakeContext(parallel=1)
    run = Run(context)
    run.batcher.settings = BatcherSettings(16, True, 0, DraftLimits(4))
    prompt, image = with_image([10], IMAGE_A, 3, [12, 10])  # an n-gram would propose the image
    asking = job(prompt, max_tokens=4, media=(image,))
    run.submit(asking)
    run.until_idle()
    assert run.text(asking) == "<11><12><13><14>"
    assert all(report.drafted == 0 for report in run.reports)
    ending, tail = with_image([10], IMAGE_A, 3, [])
    refused = job(ending, max_tokens=2, media=(tail,))
    run.submit(refused)
    run.until_idle()
    assert run.ending(refused).finish_reason == "error"
    assert "must not end with an image" in (run.ending(refused).error or "")


@pytest.mark.parametrize("position", [0, 3, 5])
def test_snap_moves_a_cut_inside_a_run_to_its_start_and_leaves_others(position: int) -> None:
    _, image = with_image([1, 2], IMAGE_A, 3, [4])
    expected = 2 if 2 < position < 5 else position
    assert media.snap([image], position) == expected


def test_other_streams_keep_stepping_while_an_image_is_with_the_encoder() -> None:
    context = FakeContext(parallel=2)
    context.encode_gate.clear()  # the encoder holds the image until the test lets it go
    run = Run(context)
    streaming = job([1, 2], max_tokens=30)
    run.submit(streaming)
    run.step(2)
    prompt, image = with_image([10, 11], IMAGE_B, 4, [12, 13])
    asking = job(prompt, max_tokens=2, media=(image,))
    run.submit(asking)
    run.step(6)
    assert run.context.media_evaluated == [] and len(run.text(streaming)) > 0
    before = run.text(streaming)
    run.step(4)
    assert len(run.text(streaming)) > len(before)  # it kept generating
    assert run.batcher.sequences[1].cached == [10, 11]  # the text before the image, no further
    context.encode_gate.set()
    run.until_idle()
    assert run.context.media_evaluated == [(1, 2, 4)] and run.text(asking) == "<14><15>"


def test_an_image_the_encoder_cannot_encode_ends_its_choice_with_an_error_alone() -> None:
    context = FakeContext(parallel=2, encode_fails=True)
    run = Run(context)
    streaming = job([1, 2], max_tokens=6)
    prompt, image = with_image([10], IMAGE_A, 3, [12])
    asking = job(prompt, max_tokens=2, media=(image,))
    run.submit(streaming, asking)
    run.until_idle()
    assert run.ending(asking).finish_reason == "error" and "encode" in (run.ending(asking).error or "")
    assert run.ending(streaming).finish_reason == "length"
    run.batcher.encoder.close()  # its thread stops (and a second close is nothing)
    run.batcher.encoder.close()
