"""LLM_WARM_SET's file: what a line may hold, what each refusal says, the body each request is sent with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.settings.config import Config
from app.settings.setting import ConfigError
from app.settings.warm_set import WarmRequest, parse

MESSAGES = {
    "model": "smollm2",
    "max_tokens": 512,
    "stream": True,
    "messages": [{"role": "user", "content": "hi"}],
}


def written(tmp_path: Path, *lines: object) -> str:
    path = tmp_path / "warm.jsonl"
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return str(path)


def test_a_batch_files_lines_serve_as_they_are_and_blank_lines_are_skipped(tmp_path: Path) -> None:
    batch_line = {"custom_id": "a", "method": "POST", "url": "/v1/messages", "body": MESSAGES}
    (first, second) = parse(
        written(tmp_path, batch_line, "", {"url": "/api/chat", "body": {"model": "m"}, "key": "bob"})
    )
    assert (first.line, first.url, first.key, first.model) == (1, "/v1/messages", None, "smollm2")
    assert (second.line, second.key) == (3, "bob")
    assert parse("") == ()


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("not json", "line 1 is not valid JSON"),
        ([1, 2], "line 1 is not a JSON object"),
        ({"url": "/v1/messages", "body": {}, "priority": 1}, "unknown field 'priority'"),
        ({"method": "GET", "url": "/v1/messages", "body": {}}, 'method must be "POST"'),
        ({"url": "/v1/embeddings", "body": {}}, "url must be one of /v1/chat/completions"),
        ({"url": "/v1/messages", "body": "hi"}, "body must be a JSON object"),
        ({"url": "/v1/messages", "body": {}, "key": 7}, "key must be an API key's name"),
    ],
)
def test_a_bad_line_is_refused_saying_which_and_why(tmp_path: Path, line: object, says: str) -> None:
    with pytest.raises(ValueError, match=says.replace("(", r"\(")):
        parse(written(tmp_path, line))


def test_a_missing_file_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="cannot read /no/such/warm.jsonl"):
        parse("/no/such/warm.jsonl")


def test_each_request_asks_for_one_token_unstreamed_and_a_response_unstored() -> None:
    assert WarmRequest(1, "/v1/messages", MESSAGES).one_token() == {
        **MESSAGES,
        "max_tokens": 1,
        "stream": False,
    }
    responses = WarmRequest(1, "/v1/responses", {"input": "hi", "store": True}).one_token()
    assert responses == {
        "input": "hi",
        "store": False,
        "background": False,
        "stream": False,
        "max_output_tokens": 1,
    }
    ollama = WarmRequest(1, "/api/chat", {"model": "m", "options": {"temperature": 0}}).one_token()
    assert ollama["options"] == {"temperature": 0, "num_predict": 1} and ollama["stream"] is False


def test_keys_and_models_are_checked_against_the_configuration(tmp_path: Path) -> None:
    named = written(tmp_path, {"url": "/v1/messages", "body": MESSAGES, "key": "carol"})
    with pytest.raises(
        ConfigError, match="LLM_WARM_SET, line 1: 'carol' is not the name of a configured key"
    ):
        Config.from_env({"LLM_WARM_SET": named, "LLM_API_KEYS": "alice:sk-a", "LLM_MODEL_ID": "smollm2"})
    with pytest.raises(ConfigError, match="names key 'carol', but no API keys are configured"):
        Config.from_env({"LLM_WARM_SET": named, "LLM_MODEL_ID": "smollm2"})
    other = written(tmp_path, {"url": "/v1/messages", "body": {**MESSAGES, "model": "llama"}})
    with pytest.raises(ConfigError, match="model 'llama' is not one of LLM_MODELS loaded at start-up"):
        Config.from_env({"LLM_WARM_SET": other, "LLM_MODEL_ID": "smollm2"})
    fine = written(tmp_path, {"url": "/v1/messages", "body": MESSAGES, "key": "alice"})
    config = Config.from_env({"LLM_WARM_SET": fine, "LLM_API_KEYS": "alice:sk-a", "LLM_MODEL_ID": "smollm2"})
    assert [request.key for request in config.warm_set] == ["alice"]
