"""OpenAI's two logprobs shapes, built from the engine's per-token entries."""

from __future__ import annotations

from app.api.generation import logprobs
from app.engine.types import TokenLogprob

HELLO = TokenLogprob(1, b"Hello", -0.25, ((1, b"Hello", -0.25), (2, b"Hi", -1.5)))
SPACE = TokenLogprob(3, b" world", -0.5, ((3, b" world", -0.5),))
HALF_EURO = TokenLogprob(4, b"\xe2\x82", -2.0, ())  # a token ending mid-character


def test_chat_shape() -> None:
    shaped = logprobs.chat([HELLO, SPACE])
    assert shaped["refusal"] is None
    first = shaped["content"][0]
    assert first == {
        "token": "Hello",
        "logprob": -0.25,
        "bytes": list(b"Hello"),
        "top_logprobs": [
            {"token": "Hello", "logprob": -0.25, "bytes": list(b"Hello")},
            {"token": "Hi", "logprob": -1.5, "bytes": list(b"Hi")},
        ],
    }
    assert [entry["token"] for entry in shaped["content"]] == ["Hello", " world"]


def test_chat_shape_keeps_the_exact_bytes_of_a_split_character() -> None:
    entry = logprobs.chat([HALF_EURO])["content"][0]
    assert entry["bytes"] == [0xE2, 0x82] and entry["top_logprobs"] == []


def test_text_shape_runs_its_offsets_across_chunks() -> None:
    text = logprobs.TextLogprobs(offset=6)  # after an echoed prompt of six characters
    first = text.format([HELLO])
    second = text.format([SPACE])
    assert first == {
        "tokens": ["Hello"],
        "token_logprobs": [-0.25],
        "top_logprobs": [{"Hello": -0.25, "Hi": -1.5}],
        "text_offset": [6],
    }
    assert second["text_offset"] == [11] and second["tokens"] == [" world"]
    assert text.format([]) == {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}


def test_text_shape_always_has_the_chosen_token_among_the_likeliest() -> None:
    # logprobs: 0 asks for no alternatives, and OpenAI still gives the chosen token's; a token
    # sampled from outside the top ones makes logprobs + 1 entries.
    alone = TokenLogprob(1, b"Hello", -0.25, ())
    unlikely = TokenLogprob(2, b"Hi", -1.5, ((1, b"Hello", -0.25),))
    shaped = logprobs.TextLogprobs(0).format([alone, unlikely])
    assert shaped["top_logprobs"] == [{"Hello": -0.25}, {"Hello": -0.25, "Hi": -1.5}]
