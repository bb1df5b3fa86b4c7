"""`return_progress`: how far a long prompt is evaluated, streamed as llama-server streams it.

Ours with 64-token prefill chunks beside llama-server with 64-token batches, on the same model
and prompt: the same `prompt_progress` figures, on the same kind of event, before the first
token. The SDKs read the streams that carry them as they read any other.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest

from app.settings.values import default_model_path
from harness import llama_server
from harness.servers import Server, Service
from tests.integration.conftest import assert_clean

CHUNK = 64
# About 330 tokens once templated: six chunks of the prompt.
LONG = "Here is a list of fruit: " + ", ".join(f"fruit number {n}" for n in range(60)) + ". Name one."
MESSAGES = [{"role": "user", "content": LONG}]
KEYS = {"total", "cache", "processed", "time_ms"}


@pytest.fixture(scope="module")
def ours() -> Iterator[Server]:
    server = Server(
        # A prompt alone is evaluated a batch a step, as llama-server's (-b, -ub below).
        LLM_WORKERS="1",
        LLM_N_THREADS="1",
        LLM_N_BATCH=str(CHUNK),
        LLM_PREFILL_CHUNK=str(CHUNK),
        LLM_BATCH_INVARIANT="1",
    ).wait_ready()
    yield server
    log = server.output()
    server.stop(wait=False)
    assert_clean(log)


@pytest.fixture(scope="module")
def reference() -> Iterator[Service]:
    extra = ("-b", str(CHUNK), "-ub", str(CHUNK))
    service = llama_server.start(
        default_model_path(), threads=1, slots=1, n_ctx=2048, extra=extra, same_kernels=True
    )
    yield service
    service.stop()


def data_events(url: str, path: str, body: dict) -> list[dict]:
    """Each `data:` event's JSON, read off the wire."""
    with httpx.stream("POST", url + path, json=body, timeout=120) as answer:
        assert answer.status_code == 200, answer.read()
        return [json.loads(line[6:]) for line in answer.iter_lines() if line.startswith("data: {")]


def chat(url: str, **extra: object) -> list[dict]:
    body = {"messages": MESSAGES, "max_tokens": 6, "temperature": 0, "stream": True, **extra}
    return data_events(url, "/v1/chat/completions", body)


def progress_of(events: list[dict]) -> list[dict]:
    return [event["prompt_progress"] for event in events if "prompt_progress" in event]


def test_chat_progress_is_llama_servers_chunk_by_chunk(ours: Server, reference: Service) -> None:
    cold_ours, cold_theirs = chat(ours.url, return_progress=True), chat(reference.url, return_progress=True)
    mine, theirs = progress_of(cold_ours), progress_of(cold_theirs)
    assert all(set(p) == KEYS for p in mine + theirs)
    assert len(mine) > 4  # the prompt took several steps
    figures = [(p["total"], p["cache"], p["processed"]) for p in mine]
    assert figures == [(p["total"], p["cache"], p["processed"]) for p in theirs]
    assert figures[0][2] == figures[0][1] and figures[-1][2] == figures[-1][0]  # from the cache to the end
    assert [p["processed"] for p in mine] == sorted(p["processed"] for p in mine)
    assert [p["time_ms"] for p in mine] == sorted(p["time_ms"] for p in mine)
    # Each on a chunk that opens the choice with its role, before any text, as llama-server's.
    for events in (cold_ours, cold_theirs):
        first_text = next(
            i for i, e in enumerate(events) if e["choices"] and e["choices"][0]["delta"].get("content")
        )
        carrying = [i for i, e in enumerate(events) if "prompt_progress" in e]
        assert max(carrying) < first_text
        assert all(events[i]["choices"][0]["delta"]["role"] == "assistant" for i in carrying)
    answer = "".join(e["choices"][0]["delta"].get("content") or "" for e in cold_ours if e["choices"])
    plain = chat(ours.url)  # not asked: no progress, the same answer
    assert not progress_of(plain)
    assert answer == "".join(e["choices"][0]["delta"].get("content") or "" for e in plain if e["choices"])
    # Again: the prompt is cached but for its last token, which is evaluated again (llama-server's too).
    warm_ours, warm_theirs = (
        progress_of(chat(ours.url, return_progress=True)),
        progress_of(chat(reference.url, return_progress=True)),
    )
    assert [(p["cache"], p["processed"]) for p in warm_ours] == [
        (p["cache"], p["processed"]) for p in warm_theirs
    ]
    assert warm_ours[0]["cache"] == warm_ours[0]["total"] - 1


def test_text_and_llama_completions_carry_progress(ours: Server, reference: Service) -> None:
    body = {"prompt": LONG, "max_tokens": 4, "temperature": 0, "stream": True, "return_progress": True}
    for path in ("/v1/completions", "/completion"):
        mine, theirs = data_events(ours.url, path, body), data_events(reference.url, path, body)
        assert [set(e) for e in mine if "prompt_progress" in e] == [
            set(e) for e in theirs if "prompt_progress" in e
        ]
        assert [p["processed"] for p in progress_of(mine)] == [p["processed"] for p in progress_of(theirs)]
    whole = httpx.post(ours.url + "/v1/completions", json={**body, "stream": False}, timeout=120).json()
    assert (
        "prompt_progress" not in whole and whole["usage"]["prompt_tokens"] > 5 * CHUNK
    )  # a whole answer: none


def test_the_sdks_read_streams_with_progress(ours: Server, request: pytest.FixtureRequest) -> None:
    client = openai.OpenAI(base_url=ours.url + "/v1", api_key="none")
    request.addfinalizer(client.close)
    model = client.models.list().data[0].id
    with_progress = client.chat.completions.create(
        model=model,
        messages=MESSAGES,
        max_tokens=6,
        temperature=0,
        stream=True,
        extra_body={"return_progress": True},
    )
    text = "".join(c.choices[0].delta.content or "" for c in with_progress if c.choices)
    plain = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=6, temperature=0)
    assert text == plain.choices[0].message.content

    # The Responses API: `response.in_progress` again, which the SDK's stream state takes.
    body = {
        "input": "Again. " + LONG,
        "max_output_tokens": 6,
        "temperature": 0,
        "stream": True,
        "return_progress": True,
    }
    raw = data_events(ours.url, "/v1/responses", body)
    again = [e for e in raw if e["type"] == "response.in_progress" and "prompt_progress" in e]
    assert (
        len(again) > 4 and again[-1]["prompt_progress"]["processed"] == again[-1]["prompt_progress"]["total"]
    )
    assert [e["sequence_number"] for e in raw] == list(range(len(raw)))
    with client.responses.stream(
        model=model,
        input="Again. " + LONG,
        max_output_tokens=6,
        temperature=0,
        extra_body={"return_progress": True},
    ) as stream:  # the SDK's stream state takes every event (its snapshot raises on what it cannot)
        streamed = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
    unasked = client.responses.create(model=model, input="Again. " + LONG, max_output_tokens=6, temperature=0)
    assert streamed == unasked.output_text

    # Anthropic's Messages: on `ping` events, which the SDK skips.
    fresh = [{"role": "user", "content": "Once more. " + LONG}]
    body = {"model": model, "messages": fresh, "max_tokens": 6, "temperature": 0, "stream": True,
            "return_progress": True}  # fmt: skip
    raw = data_events(ours.url, "/v1/messages", body)
    pings = [e for e in raw if e["type"] == "ping"]
    assert len(pings) > 4 and all(set(e["prompt_progress"]) == KEYS for e in pings)
    messages = anthropic.Anthropic(base_url=ours.url, api_key="none")
    request.addfinalizer(messages.close)
    with messages.messages.stream(
        model=model, messages=fresh, max_tokens=6, extra_body={"temperature": 0, "return_progress": True}
    ) as stream:
        said = stream.get_final_message()
    unasked_message = messages.messages.create(
        model=model, messages=fresh, max_tokens=6, extra_body={"temperature": 0}
    )
    assert [b.text for b in said.content] == [b.text for b in unasked_message.content]
