"""Chat, completions and models answers, streamed events included, against OpenAI's own published schemas."""

from __future__ import annotations

import httpx
import pytest

from harness.servers import Server
from tests.support import sse
from tests.support.provider_schemas import check_openai

CHAT = {"messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 8}
TOOL = {"type": "function", "function": {"name": "paint", "parameters": {"type": "object",
        "properties": {"colour": {"type": "string"}}, "required": ["colour"]}}}  # fmt: skip
CHAT_CASES = [
    pytest.param(CHAT, id="plain"),
    pytest.param({**CHAT, "n": 2, "logprobs": True, "top_logprobs": 2, "seed": 1}, id="n-logprobs"),
    pytest.param({**CHAT, "max_tokens": 40, "tools": [TOOL], "tool_choice": "required"}, id="tool-call"),
    pytest.param({**CHAT, "stop": ["e"], "stream_options": {"include_usage": True}}, id="stop-usage"),
]
COMPLETION_CASES = [
    pytest.param({"prompt": "Once", "max_tokens": 6}, id="plain"),
    pytest.param({"prompt": ["A", "B"], "max_tokens": 4, "echo": True, "logprobs": 2}, id="echo-logprobs"),
]


@pytest.mark.parametrize("body", CHAT_CASES)
def test_chat_completion_and_chunks(server: Server, body: dict) -> None:
    unstreamed = {name: value for name, value in body.items() if name != "stream_options"}  # a 400 there
    whole = httpx.post(server.url + "/v1/chat/completions", json=unstreamed, timeout=60).json()
    check_openai(whole, "CreateChatCompletionResponse")
    assert isinstance(whole["system_fingerprint"], str) and whole["system_fingerprint"].startswith("fp_")
    streamed = httpx.post(server.url + "/v1/chat/completions", json={**body, "stream": True}, timeout=60)
    for chunk in sse.payloads(streamed.text):
        check_openai(chunk, "CreateChatCompletionStreamResponse")
        assert chunk["system_fingerprint"] == whole["system_fingerprint"]


def check_completion(whole: dict) -> None:
    """Check a text completion; an echoed prompt's first token has no log-probability.

    OpenAI's legacy API (and vLLM, and lm-eval reading them) put null first in `token_logprobs`
    and `top_logprobs` when the prompt is echoed, which OpenAI's own schema does not allow for:
    that null is checked here, and the rest against the schema.
    """
    for choice in whole["choices"]:
        logprobs = choice.get("logprobs")
        if logprobs and logprobs["token_logprobs"] and logprobs["token_logprobs"][0] is None:
            assert logprobs["top_logprobs"][0] is None
            logprobs["token_logprobs"][0], logprobs["top_logprobs"][0] = 0.0, {}
    check_openai(whole, "CreateCompletionResponse")


@pytest.mark.parametrize("body", COMPLETION_CASES)
def test_text_completion_and_chunks(server: Server, body: dict) -> None:
    whole = httpx.post(server.url + "/v1/completions", json=body, timeout=60).json()
    if body.get("echo") and body.get("logprobs"):  # the prompt's tokens come first, the first one unscored
        assert all(c["logprobs"]["token_logprobs"][0] is None for c in whole["choices"])
    check_completion(whole)
    # OpenAI publishes no schema of its own for text-completion chunks: a chunk is the whole
    # object's shape with finish_reason still null, so the chunks that end a choice are checked.
    streamed = httpx.post(server.url + "/v1/completions", json={**body, "stream": True}, timeout=60)
    finals = [c for c in sse.payloads(streamed.text) if c["choices"][0]["finish_reason"] is not None]
    assert len(finals) == len(whole["choices"])
    for chunk in finals:
        check_completion(chunk)


def test_models(server: Server) -> None:
    listed = httpx.get(server.url + "/v1/models", timeout=10).json()
    check_openai(listed, "ListModelsResponse")
    check_openai(httpx.get(server.url + "/v1/models/" + listed["data"][0]["id"], timeout=10).json(), "Model")
