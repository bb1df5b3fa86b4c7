"""What coding agents send, field by field, on the real server through the official SDKs: Claude Code's
Messages requests, Codex's Responses requests, compressed bodies, and the cache told honestly."""

from __future__ import annotations

import gzip
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
import zstandard

from app.settings.values import default_model_path
from harness.servers import Server, serving_models
from tests.support import sse

MODEL = "SmolLM2-135M-Instruct.Q4_1"
TEMPLATES = Path(__file__).parents[2] / "data" / "templates"
BETAS = ["claude-code-20250219", "interleaved-thinking-2025-05-14", "context-management-2025-06-27",
         "mid-conversation-tool-changes-2026-07-01", "effort-2025-11-24"]  # fmt: skip
ENVIRONMENT = "# Environment\ncwd: /work\nplatform: linux"
READ = {"name": "Read", "description": "Read a file", "input_schema": {"type": "object",
        "properties": {"file_path": {"type": "string"}}}, "cache_control": {"type": "ephemeral"}}  # fmt: skip


def claude_code_body(
    session: str, question: str, history: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A request in the shape Claude Code 2.1 sends (its fields, not its 77 KB of prompt)."""
    return {
        "model": MODEL,
        "max_tokens": 32000,  # whatever the model: cut to the context's room
        "system": [
            {
                "type": "text",
                "text": f"x-anthropic-billing-header: cc_version=2.1.328.{uuid.uuid4().hex[:3]};",
            },
            {
                "type": "text",
                "text": f"You are a coding agent in session {session}. " + "Be brief. " * 8,
                "cache_control": {"type": "ephemeral"},
            },
        ],  # fmt: skip
        "messages": [
            *(history or []),
            {"role": "user", "content": [{"type": "text", "text": question}]},
            {
                "role": "system",
                "content": [{"type": "text", "text": "# Environment\ncwd: /work\nplatform: linux"}],
            },
        ],
        "tools": [
            READ,
            {
                "name": "Grep",
                "description": "Search",
                "input_schema": {"type": "object"},
                "defer_loading": True,
            },
        ],  # fmt: skip
        "thinking": {"type": "adaptive", "display": "omitted"},
        "output_config": {"effort": "high"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "metadata": {"user_id": json.dumps({"device_id": "d", "session_id": session})},
        "temperature": 0,
        "stream": True,
    }


@pytest.fixture
def claude(server: Server) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0) as opened:
        yield opened


def _stream(server: Server, body: dict[str, Any]) -> tuple[httpx.Response, list[tuple[str, Any]]]:
    headers = {"anthropic-version": "2023-06-01", "anthropic-beta": ",".join(BETAS), "x-app": "cli"}
    answer = httpx.post(f"{server.url}/v1/messages?beta=true", json=body, headers=headers, timeout=120)
    return answer, sse.named(answer.content)


def test_claude_codes_request_is_answered_and_its_next_turn_read_from_the_cache(server: Server) -> None:
    session = uuid.uuid4().hex
    first, events = _stream(server, {**claude_code_body(session, "Say hello."), "max_tokens": 40})
    assert first.status_code == 200, first.text
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-1] == "message_stop" and "error" not in names
    text = "".join(d["delta"].get("text", "") for n, d in events if n == "content_block_delta")
    history = [{"role": "user", "content": [{"type": "text", "text": "Say hello."}]},
               {"role": "system", "content": [{"type": "text", "text": ENVIRONMENT}]},
               {"role": "assistant", "content": [{"type": "text", "text": text}]}]  # fmt: skip
    second, events = _stream(server, {**claude_code_body(session, "Again?", history), "max_tokens": 40})
    assert second.status_code == 200, second.text
    start = events[0][1]["message"]["usage"]  # message_start: what the cache held, as Anthropic counts it
    final = [d["usage"] for n, d in events if n == "message_delta"][-1]
    assert start["cache_read_input_tokens"] == final["cache_read_input_tokens"]
    total = final["input_tokens"] + final["cache_creation_input_tokens"] + final["cache_read_input_tokens"]
    assert final["cache_read_input_tokens"] > 0.8 * total, final  # the billing line changed; nothing else


def test_count_tokens_as_claude_code_calls_it_matches_the_message(claude: anthropic.Anthropic) -> None:
    body = claude_code_body(uuid.uuid4().hex, "Count me.")
    for key in ("max_tokens", "stream", "temperature", "metadata", "context_management"):
        body.pop(key)
    counted = claude.beta.messages.count_tokens(**body, betas=BETAS)
    answer = claude.beta.messages.create(**{**body, "max_tokens": 5}, betas=BETAS)
    usage = answer.usage
    whole = (
        usage.input_tokens + (usage.cache_creation_input_tokens or 0) + (usage.cache_read_input_tokens or 0)
    )
    assert counted.input_tokens == whole > 100


def test_an_answer_cut_at_the_window_and_a_prompt_past_it(start_server: Callable[..., Server]) -> None:
    small = start_server(LLM_N_CTX="64", LLM_WORKERS="1")
    with anthropic.Anthropic(base_url=small.url, api_key="unused", max_retries=0) as client:
        count = [{"role": "user", "content": "List the numbers from 1 to 300 separated by commas."}]
        with client.messages.stream(
            model=MODEL, max_tokens=32000, messages=count, extra_body={"temperature": 0}
        ) as streamed:  # as Claude Code asks: a stream, max_tokens far past the window
            answer = streamed.get_final_message()  # fmt: skip
        assert answer.stop_reason == "model_context_window_exceeded"
        assert answer.usage.input_tokens + answer.usage.output_tokens == 64
        with pytest.raises(anthropic.BadRequestError) as refused:
            client.messages.create(
                model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "x " * 300}]
            )
        message = refused.value.body["error"]["message"]
        assert message.startswith("prompt is too long: ") and message.endswith(" tokens > 63 maximum"), (
            message
        )


@pytest.fixture(scope="module")
def refusing() -> Iterator[Server]:
    """The default model under Mistral Nemo's template, which takes one leading system message only."""
    template = (TEMPLATES / "mistralai-Mistral-Nemo-Instruct-2407.jinja").read_text()
    with serving_models([{"id": "nemo", "path": default_model_path(), "n_ctx": 4096, "workers": 1,
                          "chat_template": template}]) as server:  # fmt: skip
        yield server


def test_system_turns_anywhere_on_a_template_that_refuses_them(refusing: Server) -> None:
    messages = [
        {"role": "developer", "content": "You are Codex."},
        {"role": "developer", "content": "Skills: none."},
        {"role": "user", "content": "Say hello."},
        {"role": "system", "content": "# Environment\ncwd: /work"},
    ]
    prompt = httpx.post(f"{refusing.url}/apply-template", json={"messages": messages}, timeout=60)
    assert prompt.status_code == 200, prompt.text
    text = prompt.json()["prompt"]
    assert all(m["content"] in text for m in messages)  # every instruction, none refused
    assert text.index("You are Codex.") < text.index("Say hello.") < text.index("# Environment")
    body = {**claude_code_body("s", "Say hello."), "model": "nemo", "stream": False, "max_tokens": 8}
    answer = httpx.post(f"{refusing.url}/v1/messages", json=body, timeout=120)
    assert answer.status_code == 200, answer.text


CODEX_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "name": "exec_command", "description": "Run a command", "strict": False,
     "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}},
    {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents", "tools": [
        {"type": "function", "name": "close_agent", "description": "Close an agent",
         "parameters": {"type": "object", "properties": {"id": {"type": "string", "maxLength": 8}},
                        "required": ["id"], "additionalProperties": False}}]},
    {"type": "web_search", "external_web_access": False},
]  # fmt: skip


def _message(role: str, text: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}


def codex_body(**fields: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "input": [_message("developer", "Be Codex."), _message("user", "Close agent a1.")],
        "tools": CODEX_TOOLS, "tool_choice": "auto", "parallel_tool_calls": True,
        "reasoning": {"summary": "auto"}, "store": False, "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": uuid.uuid4().hex, "extra_body": {"client_metadata": {"session_id": "s"}},
        "max_output_tokens": 40, "temperature": 0, **fields,
    }  # fmt: skip


def test_codex_tools_a_namespaced_call_and_hosted_tools_left_out(client: openai.OpenAI) -> None:
    forced = {"type": "function", "name": "close_agent", "namespace": "multi_agent_v1"}
    raw = client.responses.with_raw_response.create(**codex_body(tool_choice=forced))
    assert raw.headers["X-Skipped-Tools"] == "web_search"
    (call,) = [item for item in raw.parse().output if item.type == "function_call"]
    assert call.name == "close_agent" and call.namespace == "multi_agent_v1"
    assert set(json.loads(call.arguments)) == {"id"}
    again = codex_body(input=[*codex_body()["input"],
                              {"type": "function_call", "call_id": call.call_id, "name": "close_agent",
                               "namespace": "multi_agent_v1", "arguments": "{not json"},  # malformed, as sent
                              {"type": "function_call_output", "call_id": call.call_id,
                               "output": "closed"}])  # fmt: skip
    assert client.responses.create(**again).status in ("completed", "incomplete")


def test_compaction_and_a_turn_that_carries_it(client: openai.OpenAI) -> None:
    turns = [{"role": "user", "content": "My name is Ada and I am fixing the parser in src/parse.py."},
             {"role": "assistant", "content": "Understood. The parser fails on empty input."},
             {"role": "user", "content": "Add a test for it."}]  # fmt: skip
    compacted = client.responses.with_raw_response.compact(model=MODEL, input=turns).http_response.json()
    assert compacted["object"] == "response.compaction"
    items = compacted["output"]
    assert [item["type"] for item in items] == [
        "message",
        "message",
        "compaction",
    ]  # users', then the summary
    assert items[2]["encrypted_content"].startswith("llmsealed1:")
    carried = [*items, {"role": "user", "content": "What is my name?"}]
    plain = [items[0], items[1], {"role": "user", "content": "What is my name?"}]
    with_summary = client.responses.input_tokens.count(model=MODEL, input=carried).input_tokens
    without = client.responses.input_tokens.count(model=MODEL, input=plain).input_tokens
    assert with_summary > without  # the summary takes the compaction item's place in the prompt
    assert client.responses.create(model=MODEL, input=carried, max_output_tokens=5, store=False).status


def test_compressed_bodies_and_a_bomb(server: Server) -> None:
    body = json.dumps(codex_body()).encode()
    for encoding, packed in (
        ("zstd", zstandard.ZstdCompressor().compress(body)),
        ("gzip", gzip.compress(body)),
    ):
        headers = {"Content-Type": "application/json", "Content-Encoding": encoding}
        answer = httpx.post(f"{server.url}/v1/responses", content=packed, timeout=120, headers=headers)
        assert answer.status_code == 200, (encoding, answer.text)
    bomb = zstandard.ZstdCompressor().compress(b'{"input": "' + b"a" * (64 << 20) + b'"}')
    headers = {"Content-Type": "application/json", "Content-Encoding": "zstd"}
    refused = httpx.post(f"{server.url}/v1/responses", content=bomb, timeout=120, headers=headers)
    assert refused.status_code == 413 and "LLM_MAX_BODY_BYTES" in refused.json()["error"]["message"]


def test_a_prompt_that_left_the_cache_midway_says_where(client: openai.OpenAI) -> None:
    rules = " ".join(f"Rule {n}: be careful." for n in range(40))
    tail = [{"role": "user", "content": "Read the file."}, {"role": "assistant", "content": "Done."},
            {"role": "user", "content": "Next?"}]  # fmt: skip
    monday = [{"role": "system", "content": f"You are an agent. {rules} Today is Monday."}, *tail]
    client.chat.completions.create(model=MODEL, messages=monday, max_tokens=2)
    tuesday = [{"role": "system", "content": f"You are an agent. {rules} Today is Tuesday."}, *tail]
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=tuesday, max_tokens=2)
    where = dict(part.split("=") for part in raw.headers["X-Cache-Miss"].split("; "))
    assert where["message"] == "0" and where["role"] == "system" and int(where["token"]) > 200
    assert raw.parse().usage.prompt_tokens_details.cached_tokens == int(where["token"])


def test_the_window_in_every_listing(
    claude: anthropic.Anthropic, client: openai.OpenAI, server: Server
) -> None:
    (model,) = client.models.list().data
    fields = model.model_dump()
    window = fields["max_model_len"]
    assert window == fields["n_ctx"] == fields["context_length"] == fields["max_input_tokens"] > 0
    listed = claude.models.list()
    assert [m.id for m in listed.data] == [MODEL] and listed.has_more is False
    assert claude.models.retrieve(MODEL).display_name == MODEL
    shown = httpx.post(f"{server.url}/api/show", json={"model": MODEL}, timeout=30).json()
    assert shown["model_info"]["llama.context_length"] == window
