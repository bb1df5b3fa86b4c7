"""The OpenAI completion objects and stream chunks, for chat and text alike."""

from __future__ import annotations

from app.api.chat.objects import FinishedChoice, ObjectHeader, usage

CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


def test_usage_adds_up_and_tells_the_cached_share() -> None:
    assert usage(7, 5, 4) == {
        "prompt_tokens": 7,
        "completion_tokens": 5,
        "total_tokens": 12,
        "prompt_tokens_details": {"cached_tokens": 4},
    }
    assert usage(7, 5)["prompt_tokens_details"] == {"cached_tokens": 0}


def test_ids_name_the_object_kind() -> None:
    assert ObjectHeader("m", chat=True).id.startswith("chatcmpl-")
    assert ObjectHeader("m", chat=False).id.startswith("cmpl-")
    assert ObjectHeader("m", chat=True).id != ObjectHeader("m", chat=True).id


def test_chat_completion_sorts_choices_and_nulls_content_for_tool_calls() -> None:
    shape = ObjectHeader("m", chat=True, created=1)
    body = shape.completion(
        [FinishedChoice(1, "", "tool_calls", tool_calls=[CALL]), FinishedChoice(0, "Hi", "stop")], usage(1, 2)
    )
    assert body["object"] == "chat.completion" and body["created"] == 1 and body["model"] == "m"
    assert [c["index"] for c in body["choices"]] == [0, 1]
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "Hi", "refusal": None}
    assert body["choices"][1]["message"]["content"] is None
    assert body["choices"][1]["message"]["tool_calls"] == [CALL]
    assert body["usage"]["total_tokens"] == 3


def test_text_completion_choice() -> None:
    body = ObjectHeader("m", chat=False).completion([FinishedChoice(0, "abc", "length")], usage(1, 1))
    assert body["object"] == "text_completion"
    assert body["choices"] == [{"index": 0, "text": "abc", "logprobs": None, "finish_reason": "length"}]


def test_chat_chunks_share_the_envelope_and_open_with_the_role() -> None:
    shape = ObjectHeader("m", chat=True)
    first = shape.chunk("", index=0, first=True)
    middle = shape.chunk("Hi", index=0)
    last = shape.chunk(None, "stop", index=0)
    envelopes = {(c["id"], c["object"], c["created"], c["model"]) for c in (first, middle, last)}
    assert envelopes == {(shape.id, "chat.completion.chunk", shape.created, "m")}
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert (
        middle["choices"][0]["delta"] == {"content": "Hi"} and middle["choices"][0]["finish_reason"] is None
    )
    assert last["choices"][0]["delta"] == {} and last["choices"][0]["finish_reason"] == "stop"


def test_tool_call_delta_chunk() -> None:
    delta = {"index": 0, "function": {"arguments": "{}"}}
    chunk = ObjectHeader("m", chat=True).chunk(None, index=2, tool_calls=[delta])
    assert chunk["choices"][0] == {
        "index": 2,
        "delta": {"tool_calls": [delta]},
        "logprobs": None,
        "finish_reason": None,
    }


def test_text_chunk_and_usage_chunk() -> None:
    shape = ObjectHeader("m", chat=False)
    assert shape.chunk(None, "stop", index=1)["choices"][0]["text"] == ""
    last = shape.usage_chunk(usage(2, 3))
    assert (
        last["choices"] == [] and last["usage"]["total_tokens"] == 5 and last["object"] == "text_completion"
    )
