"""llama-server's own `POST /completion`: answer, stop types and token probabilities as llama-server's.

The real server (the shared one-worker fixture) beside llama.cpp's own C++ server built from
the same llama.cpp, both greedy on the default model, compared field by field.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from app.settings.values import default_model_path
from harness import llama_server
from harness.servers import Server, Service

PROMPT = "The three primary colours are"


@pytest.fixture(scope="module")
def server(reproducible_server: Server) -> Server:
    """Ours in the reproducible mode: its answers are compared with llama-server's bit for bit."""
    return reproducible_server


@pytest.fixture(scope="module")
def reference() -> Iterator[Service]:
    service = llama_server.start(
        default_model_path(), threads=1, slots=1, n_ctx=1024, extra=("--metrics",), same_kernels=True
    )
    yield service
    service.stop()


def complete(url: str, **body: object) -> dict:
    answer = httpx.post(url + "/completion", json={"prompt": PROMPT, "temperature": 0, **body}, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()


def events(url: str, **body: object) -> list[dict]:
    request = {"prompt": PROMPT, "temperature": 0, "stream": True, **body}
    with httpx.stream("POST", url + "/completion", json=request, timeout=120) as answer:
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in answer.iter_lines() if line.startswith("data: ")]
    assert "data: [DONE]" not in lines  # llama-server's own stream ends with its last object
    return [json.loads(line[6:]) for line in lines]


def test_the_answer_and_its_token_probabilities_are_llama_servers(server: Server, reference: Service) -> None:
    ours = complete(server.url, n_predict=12, n_probs=3, return_tokens=True, cache_prompt=False)
    theirs = complete(reference.url, n_predict=12, n_probs=3, return_tokens=True, cache_prompt=False)
    for field in ("content", "tokens", "stop", "stop_type", "stopping_word", "tokens_predicted",
                  "tokens_evaluated", "has_new_line", "truncated"):  # fmt: skip
        assert ours[field] == theirs[field], field
    assert len(ours["completion_probabilities"]) == len(theirs["completion_probabilities"]) == 12
    for mine, its in zip(ours["completion_probabilities"], theirs["completion_probabilities"], strict=True):
        assert (mine["id"], mine["token"], mine["bytes"]) == (its["id"], its["token"], its["bytes"])
        assert mine["logprob"] == pytest.approx(its["logprob"], abs=2e-3)
        assert [t["id"] for t in mine["top_logprobs"]] == [t["id"] for t in its["top_logprobs"]]
        for top_mine, top_its in zip(mine["top_logprobs"], its["top_logprobs"], strict=True):
            assert top_mine["logprob"] == pytest.approx(top_its["logprob"], abs=2e-3)
    chat = "<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n"  # control tokens parsed
    assert (
        complete(server.url, prompt=chat, n_predict=-1)["content"]
        == complete(reference.url, prompt=chat, n_predict=-1)["content"]
    )
    timings = ours["timings"]
    assert timings["predicted_n"] == 12 and timings["predicted_ms"] > 0 and timings["prompt_ms"] > 0
    assert ours["model"] and ours["prompt"] == PROMPT and ours["generation_settings"]["n_predict"] == 12


def test_the_stream_is_llama_servers_events_then_the_whole_answer(server: Server, reference: Service) -> None:
    ours, theirs = events(server.url, n_predict=10, n_probs=2), events(reference.url, n_predict=10, n_probs=2)
    assert "".join(e["content"] for e in ours[:-1]) == "".join(e["content"] for e in theirs[:-1])
    *partial, last = ours
    assert all(e["stop"] is False and e["completion_probabilities"] for e in partial)
    assert [p["id"] for e in partial for p in e["completion_probabilities"]] == [
        p["id"] for e in theirs[:-1] for p in e["completion_probabilities"]
    ]
    assert last["stop"] is True and last["stop_type"] == "limit" and last["tokens_predicted"] == 10
    # The last object carries no text or ids again (a client joining the events' content gets the
    # answer once), and every event before it its token ids, asked for or not: as llama-server's.
    plain_ours, plain_theirs = events(server.url, n_predict=10), events(reference.url, n_predict=10)
    for stream, reference_stream in ((ours, theirs), (plain_ours, plain_theirs)):
        assert (
            (stream[-1]["content"], stream[-1]["tokens"])
            == ("", [])
            == (
                reference_stream[-1]["content"],
                reference_stream[-1]["tokens"],
            )
        )
        assert [e["tokens"] for e in stream[:-1]] == [e["tokens"] for e in reference_stream[:-1]]
        assert sum(len(e["tokens"]) for e in stream[:-1]) == 10


def test_each_stop_type_and_a_token_prompt(server: Server) -> None:
    assert complete(server.url, prompt="", n_predict=3)["tokens_predicted"] == 3  # from the start of text
    limited = complete(server.url, n_predict=3)
    assert (limited["stop_type"], limited["tokens_predicted"], limited["stopping_word"]) == ("limit", 3, "")
    worded = complete(server.url, n_predict=40, stop=[" "])
    assert worded["stop_type"] == "word" and worded["stopping_word"] == " "
    ended = complete(server.url, prompt="<|im_start|>user\nSay OK.<|im_end|>\n<|im_start|>assistant\n",
                     n_predict=-1)  # fmt: skip
    assert ended["stop_type"] == "eos" and ended["content"]
    tokens = httpx.post(server.url + "/tokenize", json={"content": PROMPT}).json()["tokens"]
    by_tokens = complete(server.url, prompt=tokens, n_predict=5)["content"]
    assert by_tokens == complete(server.url, n_predict=5)["content"]


def test_an_answer_that_fills_the_context_is_truncated_as_llama_servers(
    server: Server, reference: Service
) -> None:
    # Each server's context (ours 2048, the reference's 1024 per slot) less six tokens of prompt:
    # generation runs into the end of the context, which llama-server calls truncated.
    answers = []
    for url in (server.url, reference.url):
        n_ctx = httpx.get(url + "/props", timeout=30).json()["default_generation_settings"]["n_ctx"]
        word = httpx.post(url + "/tokenize", json={"content": " sky"}).json()["tokens"]
        answers.append(complete(url, prompt=word * (n_ctx - 6), n_predict=-1, cache_prompt=False))
    for answer in answers:
        assert (answer["truncated"], answer["stop_type"], answer["tokens_predicted"]) == (True, "limit", 6)
    assert complete(server.url, n_predict=4)["truncated"] is False


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"n_predict": 5}, "prompt"),
        ({"prompt": ["one", "two"]}, "prompt"),
        ({"prompt": "x", "n_indent": -1}, "n_indent"),
        ({"prompt": "x", "n_predict": -2}, "n_predict"),
        ({"prompt": "x", "n_probs": 101}, "n_probs"),
        ({"prompt": "x", "post_sampling_probs": True}, "post_sampling_probs"),
        ({"prompt": "x", "n_predict": 5000}, "n_predict"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(server: Server, body: dict, param: str) -> None:
    answer = httpx.post(server.url + "/completion", json=body, timeout=60)
    assert answer.status_code == 400 and answer.json()["error"]["param"] == param, answer.text


def test_n_predict_0_evaluates_the_prompt_and_generates_nothing(server: Server) -> None:
    body = {"prompt": PROMPT, "n_predict": 0}
    answer = httpx.post(server.url + "/completion", json=body, timeout=60).json()
    assert answer["content"] == "" and answer["tokens_predicted"] == 0 and answer["stop_type"] == "limit"
    again = httpx.post(server.url + "/completion", json={"prompt": PROMPT, "n_predict": 2}, timeout=60).json()
    assert again["tokens_cached"] == answer["tokens_evaluated"] - 1  # the prompt was evaluated and kept


def test_several_completions_of_one_prompt_as_llama_servers_n_cmpl(server: Server) -> None:
    # llama-server's n_cmpl (alias n): a list of answers, each with its index; streamed, their
    # events interleave and each ends with its own stop: true object.
    single = complete(server.url, n_predict=6)["content"]
    answers = httpx.post(
        server.url + "/completion", json={"prompt": PROMPT, "n_predict": 6, "temperature": 0, "n_cmpl": 3}
    ).json()
    assert [a["index"] for a in answers] == [0, 1, 2] and {a["content"] for a in answers} == {single}
    sampled = httpx.post(
        server.url + "/completion",
        json={"prompt": PROMPT, "n_predict": 12, "temperature": 1.5, "seed": 5, "n": 3},
    ).json()
    assert len({a["content"] for a in sampled}) > 1  # each sampled for itself (seeds 5, 6, 7)
    streamed = events(server.url, n_predict=6, n_cmpl=3)
    finals = [e for e in streamed if e["stop"]]
    assert sorted(e["index"] for e in finals) == [0, 1, 2]
    for index in range(3):
        assert "".join(e["content"] for e in streamed if e["index"] == index and not e["stop"]) == single
    too_many = httpx.post(server.url + "/completion", json={"prompt": PROMPT, "n_cmpl": 100})
    assert too_many.status_code == 400


def metric_names(url: str) -> set[str]:
    """The names a /metrics page declares (its TYPE lines)."""
    text = httpx.get(url + "/metrics", timeout=30).text
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


# llama-server's gauges of throughput since the previous scrape (reset by each scrape): a
# dashboard computes the same from the counters' rates, which are here.
SCRAPE_WINDOW_GAUGES = {
    "llamacpp:prompt_tokens_seconds", "llamacpp:predicted_tokens_seconds", "llamacpp:n_busy_slots_per_decode",
}  # fmt: skip


def test_llama_servers_metric_names_are_served_beside_ours(server: Server, reference: Service) -> None:
    for url in (server.url, reference.url):
        complete(url, n_predict=4)
    theirs = {name for name in metric_names(reference.url) if name.startswith("llamacpp:")}
    ours = metric_names(server.url)
    assert len(theirs) > 10 and not (theirs - SCRAPE_WINDOW_GAUGES) - ours, sorted(theirs - ours)


def chat_events(url: str, **body: object) -> list[dict]:
    request = {"messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 8, "temperature": 0,
               "stream": True, **body}  # fmt: skip
    with httpx.stream("POST", url + "/v1/chat/completions", json=request, timeout=120) as answer:
        assert answer.status_code == 200
        lines = [line[6:] for line in answer.iter_lines() if line.startswith("data: {")]
    return [json.loads(line) for line in lines]


def test_chat_and_text_completions_carry_llama_servers_timings(server: Server, reference: Service) -> None:
    """The same object, in the same places: the whole answer; a stream's last chunk (the usage one
    when asked for); every chunk with timings_per_token."""
    body = {"messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 8, "temperature": 0}
    ours, theirs = (
        httpx.post(s.url + "/v1/chat/completions", json=body, timeout=120).json() for s in (server, reference)
    )
    assert set(ours["timings"]) == set(theirs["timings"])
    assert ours["timings"]["predicted_n"] == ours["usage"]["completion_tokens"] == 8
    assert ours["timings"]["prompt_n"] + ours["timings"]["cache_n"] == ours["usage"]["prompt_tokens"]
    assert ours["timings"]["prompt_per_second"] > 0 and ours["timings"]["predicted_per_second"] > 0
    again = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=120).json()["timings"]
    assert again["cache_n"] > 0 and again["prompt_n"] < ours["timings"]["prompt_n"]  # the prompt cached
    for asked in ({}, {"stream_options": {"include_usage": True}}, {"timings_per_token": True}):
        mine, its = chat_events(server.url, **asked), chat_events(reference.url, **asked)
        where = [i for i, event in enumerate(mine) if "timings" in event]
        assert where == [i for i, event in enumerate(its) if "timings" in event], asked
        assert where[-1] == len(mine) - 1 and mine[-1]["timings"]["predicted_n"] == 8
    text = httpx.post(
        server.url + "/v1/completions", json={"prompt": PROMPT, "max_tokens": 4}, timeout=120
    ).json()
    assert text["timings"]["predicted_n"] == 4
