"""Nothing a client sends reaches llama.cpp's C++ in a form that crashes a worker: each input that
crashed, hung or exhausted one before (issue 71: a grammar nested 20,000 deep, a chain of 60,000
rules, "a"{3,2}, a schema whose $refs chain 20,000 deep, a property name of 200,000 characters...)
sent in every field and family that takes that kind of input, by one tenant while another streams.

Each gets a clear 4xx naming its field (or is served, where it is safe: a pattern too deep for the
converter is any string, as in llama-server); the other tenant's stream finishes whole; the server's
log shows one worker booted, no signal and no traceback.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from harness.servers import Server
from tests.support.native_inputs import CARRIERS, SERVED, crash_inputs
from tests.support.security import LEAKS

KEYS = {"alice": "sk-alice-native", "bob": "sk-bob-native"}


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    instance = Server(
        LLM_WORKERS="1",
        LLM_PARALLEL="2",
        LLM_API_KEYS=",".join(f"{name}:{key}" for name, key in KEYS.items()),
    ).wait_ready()
    yield instance
    log = instance.output()
    instance.stop(wait=False)
    assert log.count("Booting worker") == 1, log[-3000:]
    assert "SIGSEGV" not in log and "SIGABRT" not in log and "Traceback" not in log, log[-3000:]


class Stream(threading.Thread):
    """Alice's stream, read whole: its text and finish reason, or the error that cut it."""

    def __init__(self, server: Server, tokens: int) -> None:
        super().__init__(daemon=True)
        self.server, self.tokens = server, tokens
        self.started = threading.Event()
        self.chunks: list[dict[str, Any]] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        body = {"prompt": "Once upon a time", "max_tokens": self.tokens, "stream": True, "ignore_eos": True}
        headers = {"Authorization": f"Bearer {KEYS['alice']}"}
        try:
            with httpx.stream(
                "POST", f"{self.server.url}/v1/completions", json=body, headers=headers, timeout=300
            ) as answer:
                for line in answer.iter_lines():
                    if line.startswith("data: {"):
                        self.chunks.append(httpx.Response(200, content=line[6:]).json())
                        self.started.set()
        except BaseException as exc:  # noqa: BLE001 (kept, for the test to show)
            self.error = exc
        finally:
            self.started.set()

    def finished_whole(self) -> bool:
        return self.error is None and self.chunks[-1]["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("carrier", CARRIERS, ids=lambda c: c.name)
def test_the_inputs_that_crashed_a_worker_are_refused_in_every_field(server: Server, carrier: Any) -> None:
    stream = Stream(server, tokens=64)
    stream.start()
    assert stream.started.wait(120)
    headers = {"Authorization": f"Bearer {KEYS['bob']}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=120) as client:
        for name, value in crash_inputs(carrier.kind):
            answer = client.post(carrier.path, json=carrier.body(value))
            what = (carrier.name, name, answer.status_code, answer.text[:300])
            if name in SERVED:  # (a pattern too deep for the converter is any string, as in llama-server)
                assert answer.status_code in (200, 400), what
            else:
                assert answer.status_code in (400, 413), what
                assert not LEAKS.search(answer.text), what
    stream.join(300)
    assert stream.finished_whole(), (stream.error, stream.chunks[-1:] if stream.chunks else None)
    assert len(stream.chunks) >= 64


def test_a_grammar_past_a_bound_says_which_field_and_which_bound(server: Server) -> None:
    headers = {"Authorization": f"Bearer {KEYS['bob']}"}
    deep = "root ::= " + "(" * 20_000 + '"a"' + ")" * 20_000
    answer = httpx.post(
        f"{server.url}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "guided_grammar": deep},
        headers=headers,
        timeout=60,
    )
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == "guided_grammar" and "200 groups" in error["message"], error
    chain = "root ::= r0\n" + "".join(f"r{n} ::= r{n + 1}\n" for n in range(5000)) + 'r5000 ::= "x"\n'
    answer = httpx.post(
        f"{server.url}/completion",
        json={"prompt": "Hi", "n_predict": 2, "grammar": chain},
        headers=headers,
        timeout=60,
    )
    assert answer.status_code == 400 and "1000 rules" in answer.json()["error"]["message"], answer.text


def test_a_grammar_within_the_bounds_still_holds_the_answer(server: Server) -> None:
    headers = {"Authorization": f"Bearer {KEYS['bob']}"}
    nested = "root ::= " + "(" * 150 + '"yes" | "no"' + ")" * 150
    answer = httpx.post(
        f"{server.url}/v1/completions",
        json={"prompt": "Is the sky blue?", "max_tokens": 4, "grammar": nested, "temperature": 0},
        headers=headers,
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["text"] in ("yes", "no")


def test_a_tool_type_can_neither_forge_a_log_line_nor_break_a_header(server: Server) -> None:
    forged = "[2026-12-07 10:00:00 +0000] [1] [INFO] [-] app: forged by a client"
    tools = [{"type": f"web_search\n{forged}\r\nX-Injected: 1"}]
    answer = httpx.post(
        f"{server.url}/v1/responses",
        json={"model": "SmolLM2-135M-Instruct.Q4_1", "input": "Hi", "max_output_tokens": 16, "tools": tools},
        headers={"Authorization": f"Bearer {KEYS['bob']}"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text  # was a 500: the header could not hold a line break
    assert "X-Injected" not in answer.headers and "\\n" in answer.headers["X-Skipped-Tools"]
    lines = server.output().splitlines()
    assert not any(line.startswith(forged) for line in lines)  # the warning kept its one line
    assert any("web_search\\n[2026-12-07" in line for line in lines)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/completions", {"prompt": "Hi \ud800", "max_tokens": 2}),
        ("/completion", {"prompt": "\udfff", "n_predict": 2}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a\ud800b"}], "max_tokens": 2}),
        (
            "/v1/messages",
            {
                "model": "SmolLM2-135M-Instruct.Q4_1",
                "messages": [{"role": "user", "content": "\ud800"}],
                "max_tokens": 2,
            },
        ),
        (
            "/api/chat",
            {"model": "SmolLM2-135M-Instruct.Q4_1", "messages": [{"role": "user", "content": "\ud800"}]},
        ),
        ("/tokenize", {"content": "\ud800"}),
    ],
)
def test_a_lone_surrogate_is_invalid_text_not_a_500(server: Server, path: str, body: dict) -> None:
    # Found by the fuzz campaign: no tokenizer reads one, and encoding it for llama.cpp raised.
    auth = {"Authorization": f"Bearer {KEYS['bob']}"}
    answer = httpx.post(
        server.url + path,
        content=json.dumps(body).encode(),  # json.dumps writes the surrogate as the escape \ud800
        headers={**auth, "Content-Type": "application/json"},
        timeout=60,
    )
    assert answer.status_code == 400 and "surrogate" in answer.text, answer.text
    if "prompt" in body:  # a surrogate pair is a character (an emoji): served
        fine = json.dumps({**body, "prompt": "Hi \U0001f600"}).encode()  # written as \ud83d\ude00
        paired = httpx.post(
            server.url + path, content=fine, headers={**auth, "Content-Type": "application/json"}, timeout=60
        )
        assert paired.status_code == 200, paired.text


def test_a_grammar_whose_parse_stacks_multiply_stops_and_the_worker_serves_on(server: Server) -> None:
    # Each "a" doubles the parse stacks (s x or s y, both "c"): llama.cpp kept them all until the memory
    # ran out. Past its bound (grammar-bounds.patch) the grammar stops allowing tokens: the answer ends.
    ambiguous = 'root ::= s\ns ::= "a" s x | "a" s y | "b"\nx ::= "c"\ny ::= "c"\n'
    headers = {"Authorization": f"Bearer {KEYS['bob']}"}
    (a,) = httpx.post(f"{server.url}/tokenize", json={"content": "a"}, headers=headers).json()["tokens"]
    body = {
        "prompt": "aaaa",
        "max_tokens": 64,
        "grammar": ambiguous,
        "temperature": 0,
        "logit_bias": {str(a): 10},
    }
    answer = httpx.post(f"{server.url}/v1/completions", json=body, headers=headers, timeout=120)
    assert answer.status_code == 200, answer.text
    text = answer.json()["choices"][0]["text"]
    assert set(text) == {"a"} and 10 <= len(text) < 64, text  # 2^13 stacks: past 8,192 it stopped
    after = httpx.post(
        f"{server.url}/v1/completions", json={"prompt": "Hi", "max_tokens": 4}, headers=headers
    )
    assert after.status_code == 200  # the same worker (the fixture checks none was booted again)
