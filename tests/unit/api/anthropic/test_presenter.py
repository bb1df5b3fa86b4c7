"""The Messages presenter: the Message, and message_start ... message_stop with content blocks."""

from __future__ import annotations

from typing import Any

from app.api.anthropic.presenter import MessagesPresenter, Shape
from app.api.generation.loop import ChoiceResult
from app.api.http.errors import ServiceUnavailableError
from app.api.http.sealing import Sealer
from app.api.prompting.context_edits import Applied
from app.api.requests.chat import ClearThinking
from app.engine.types import Chunk, PromptProgress
from tests.support import sse
from tests.support.formats import reader

TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]
CALL = '{"name": "weather", "arguments": {"city": "Oslo"}}'


def presenter(tools: list[dict[str, Any]] | None = None) -> MessagesPresenter:
    return MessagesPresenter("test-model", 10, reader(tools))


def test_the_whole_message_with_cache_reads_counted_apart() -> None:
    message = presenter().build([ChoiceResult(0, "Hi!", "stop", 2, 4)])
    assert message["content"] == [{"type": "text", "text": "Hi!"}] and message["stop_reason"] == "end_turn"
    assert message["usage"] == {
        "input_tokens": 6,
        "output_tokens": 2,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 4,
    }


def test_stop_reasons() -> None:
    stopped = presenter().build([ChoiceResult(0, "a", "stop", 1, stop_sequence="\n")])
    assert (stopped["stop_reason"], stopped["stop_sequence"]) == ("stop_sequence", "\n")
    assert presenter().build([ChoiceResult(0, "a", "length", 1)])["stop_reason"] == "max_tokens"
    called = presenter(TOOLS).build([ChoiceResult(0, CALL, "stop", 9)])
    assert called["stop_reason"] == "tool_use" and called["content"][0]["type"] == "tool_use"
    assert called["content"][0]["input"] == {"city": "Oslo"} and called["content"][0]["id"].startswith(
        "toolu_"
    )


def test_a_text_stream_and_its_pings() -> None:
    frames = b"".join(presenter().events(iter([Chunk("Hel"), None, Chunk("lo", "stop", 2)])))
    seen = sse.named(frames)
    assert [name for name, _ in seen] == [
        "message_start", "content_block_start", "content_block_delta", "ping", "content_block_delta",
        "content_block_stop", "message_delta", "message_stop",
    ]  # fmt: skip
    assert all(data["type"] == name for name, data in seen)
    assert "".join(d["delta"]["text"] for n, d in seen if n == "content_block_delta") == "Hello"
    assert seen[-2][1]["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert seen[-2][1]["usage"]["output_tokens"] == 2


def test_a_streamed_call_is_one_tool_use_block_with_its_input_in_pieces() -> None:
    seen = sse.named(b"".join(presenter(TOOLS).events(iter([Chunk(CALL[:7]), Chunk(CALL[7:], "stop", 9)]))))
    start = next(data for name, data in seen if name == "content_block_start")
    assert start["content_block"]["type"] == "tool_use" and start["content_block"]["input"] == {}
    pieces = [d["delta"]["partial_json"] for n, d in seen if n == "content_block_delta"]
    assert "".join(pieces) == '{"city": "Oslo"}'
    assert seen[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_an_error_after_the_200_is_an_error_event_with_anthropic_types() -> None:
    (event,) = sse.named(presenter().failure(ServiceUnavailableError("busy")))
    assert event == ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})


def _shaped(**shape: Any) -> MessagesPresenter:
    return MessagesPresenter("test-model", 10, reader(None, "DeepSeek R1", thinking=True), 0, Shape(**shape))


def test_message_start_waits_for_the_prompt_and_counts_its_cache_reads_as_anthropic() -> None:
    progress = PromptProgress(total=10, cache=8, processed=8, time_ms=1)
    frames = sse.named(
        b"".join(presenter().events(iter([None, Chunk(progress=progress), Chunk("Hi", "stop", 1)])))
    )
    start = frames[0][1]["message"]["usage"]
    assert (
        frames[0][0] == "message_start"
        and start["cache_read_input_tokens"] == 8
        and start["input_tokens"] == 2
    )
    assert "ping" not in [name for name, _ in frames]  # before message_start, keep-alives are comments
    assert b": " in b"".join(presenter().events(iter([None, Chunk("Hi", "stop", 1)]))).split(b"event:")[0]


def test_omitted_thinking_keeps_its_block_with_the_text_sealed_in_its_signature() -> None:
    sealer = Sealer("a key")
    answer = "<think>Greet them.</think>Hello"
    whole = _shaped(sealer=sealer, shown=False).build([ChoiceResult(0, answer, "stop", 5)])
    thinking, text = whole["content"]
    assert thinking["thinking"] == "" and sealer.unseal(thinking["signature"]) == "Greet them."
    assert text == {"type": "text", "text": "Hello"}
    seen = sse.named(b"".join(_shaped(sealer=sealer, shown=False).events(iter([Chunk(answer, "stop", 5)]))))
    deltas = [d["delta"] for n, d in seen if n == "content_block_delta"]
    assert [d["type"] for d in deltas] == ["signature_delta", "text_delta"]
    assert sealer.unseal(deltas[0]["signature"]) == "Greet them."
    shown = sse.named(b"".join(_shaped(sealer=sealer).events(iter([Chunk(answer, "stop", 5)]))))
    kinds = [d["delta"]["type"] for n, d in shown if n == "content_block_delta"]
    assert kinds[0] == "thinking_delta" and kinds[-2:] == ["signature_delta", "text_delta"]


def test_an_answer_cut_at_the_window_says_so_and_the_edits_are_reported() -> None:
    edits = [Applied(ClearThinking(1), 2, 40)]
    whole = _shaped(window_bound=True, edits=edits).build([ChoiceResult(0, "a b", "length", 2)])
    assert whole["stop_reason"] == "model_context_window_exceeded"
    (edit,) = whole["context_management"]["applied_edits"]
    assert edit == {
        "type": "clear_thinking_20251015",
        "cleared_thinking_turns": 2,
        "cleared_input_tokens": 40,
    }
    assert "context_management" not in presenter().build([ChoiceResult(0, "a", "stop", 1)])
