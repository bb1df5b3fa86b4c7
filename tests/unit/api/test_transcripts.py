"""The transcription's prompt and written forms (app/api/audio/transcripts.py)."""

from __future__ import annotations

import pytest

from app.api.audio import transcripts

CLIP = "<clip>"
LFM2 = (
    "{{ '<|tool_list_start|>' }}{% for m in messages %}{{ m.content }}{% endfor %}{{ '<|tool_list_end|>' }}"
)


def test_the_prompt_is_llama_servers() -> None:
    assert transcripts.asr_messages("{{ x }}", None, None, CLIP) == [
        {"role": "user", "content": "Transcribe audio to text<clip>"}
    ]
    assert transcripts.asr_messages("", "Write it down.", "de", CLIP) == [
        {"role": "user", "content": "Write it down. (language: de)<clip>"}
    ]
    assert transcripts.asr_messages(LFM2, None, "fr", CLIP) == [
        {"role": "system", "content": "Perform ASR."},
        {"role": "user", "content": " (language: fr)<clip>"},
    ]


@pytest.mark.parametrize(
    ("seconds", "srt", "vtt"),
    [
        (0, "00:00:00,000", "00:00:00.000"),
        (2.5, "00:00:02,500", "00:00:02.500"),
        (3725.0049, "01:02:05,005", "01:02:05.005"),
        (59.9996, "00:01:00,000", "00:01:00.000"),
    ],
)
def test_timestamps(seconds: float, srt: str, vtt: str) -> None:
    assert transcripts.timestamp(seconds, ",") == srt
    assert transcripts.timestamp(seconds, ".") == vtt


def test_subtitles_are_one_cue_without_blank_lines_or_arrows() -> None:
    text = " Hello there.\n\n  a --> b \n"
    assert (
        transcripts.subtitles(text, 4.25, "srt")
        == "1\n00:00:00,000 --> 00:00:04,250\nHello there.\na -> b\n\n"
    )
    assert transcripts.subtitles(text, 4.25, "vtt") == (
        "WEBVTT\n\n00:00:00.000 --> 00:00:04.250\nHello there.\na -> b\n\n"
    )


def test_verbose_json_is_one_segment_over_the_clip() -> None:
    answer = transcripts.verbose("la la la la la la", None, 7.12345, [5, 6], [-0.5, -1.5], 0.0)
    assert answer["language"] == "unknown" and answer["duration"] == 7.123
    (segment,) = answer["segments"]
    assert (segment["start"], segment["end"], segment["tokens"]) == (0.0, 7.123, [5, 6])
    assert segment["avg_logprob"] == -1.0
    assert segment["compression_ratio"] > 1  # repetitive text compresses
    assert answer["usage"] == {"type": "duration", "seconds": 7}
    assert transcripts.verbose("", "en", 0.2, [], [], 0.0)["usage"]["seconds"] == 1
    assert transcripts.compression_ratio("") == 0.0
