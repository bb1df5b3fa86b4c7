"""Claude Code, Codex CLI and opencode, installed from npm, run headless against the server turn after turn.

Each agent is pointed at a recording proxy in front of the server (as the docs' Agents page
points it at the server), so every request it makes is checked: answered 2xx, and a second
turn read mostly from the cache its first turn left. The model is the greeter (a generated
model with a 32k window that says "Hello" and stops): these tests judge the protocol, not
the answers. A tool loop is made real by answering an agent's first request with a call of
its own file-reading tool (tests/support/agent_scripts.py): the agent runs it, and the
request that carries its result goes to the server.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import agents
from harness.agents import Session
from harness.recording_proxy import Exchange, RecordingProxy
from harness.servers import Server
from tests.support import agent_scripts, sse, tiny_models

pytestmark = pytest.mark.external

MODEL = "greeter"
KEY = "sk-agents-test"
WINDOW = 32768


@pytest.fixture(scope="module")
def installed() -> Path:
    return agents.installed()  # `make agents` installs them before the tier; else here, once


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    instance = Server(
        LLM_MODEL_PATH=str(tiny_models.path("greeter")),
        LLM_MODEL_ID=MODEL,
        LLM_N_CTX=str(WINDOW),
        LLM_PARALLEL="2",  # two sessions at once, each its own sequence
        LLM_WORKERS="1",
        LLM_API_KEYS=KEY,
    ).wait_ready()
    yield instance
    log = instance.output()
    instance.stop(wait=False)
    assert "Traceback" not in log, log


def session(agent: str, folder: Path, proxy: RecordingProxy) -> Session:
    return Session(agent, folder / "home", folder / "work", proxy.url, MODEL, KEY, WINDOW)


def prompt_usage(exchange: Exchange) -> tuple[int, int]:
    """(prompt tokens, of which read from the cache) as the answer's own usage reports them."""
    body = exchange.response
    if exchange.path.startswith("/v1/messages"):
        usage = [data["usage"] for name, data in sse.named(body) if name == "message_delta"][-1]
        prompt = (
            usage["input_tokens"] + usage["cache_creation_input_tokens"] + usage["cache_read_input_tokens"]
        )
        return prompt, usage["cache_read_input_tokens"]
    if exchange.path.startswith("/v1/responses"):
        (done,) = [data["response"] for name, data in sse.named(body) if name == "response.completed"]
        return done["usage"]["input_tokens"], done["usage"]["input_tokens_details"]["cached_tokens"]
    chunks = [json.loads(line[6:]) for line in body.decode().splitlines() if line.startswith("data: {")]
    usage = [c["usage"] for c in chunks if c.get("usage")][-1]
    return usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"]


def turns(agent: str, folder: Path, proxy: RecordingProxy) -> tuple[list[Exchange], list[Exchange]]:
    """Two turns of one session; the requests each made (each turn's answer checked)."""
    started = session(agent, folder, proxy)
    made = []
    for number, (prompt, again) in enumerate([("Say hello in one word.", False), ("Once more?", True)]):
        before = len(proxy.exchanges)
        run = started.turn(prompt, again=again)
        assert run.returncode == 0, (agent, number, run.stdout[-2000:], run.stderr[-2000:])
        assert "Hello" in run.stdout, (agent, number, run.stdout[-2000:])
        made.append([e for e in proxy.exchanges[before:] if e.method == "POST"])
    return made[0], made[1]


def assert_answered(requests: list[Exchange]) -> None:
    for exchange in requests:
        assert 200 <= exchange.status < 300, (exchange.path, exchange.status, exchange.response[:500])


@pytest.mark.parametrize("agent", agents.AGENTS)
def test_two_turns_the_second_read_from_the_cache(
    agent: str, installed: Path, server: Server, tmp_path: Path
) -> None:
    with RecordingProxy(server.port) as proxy:
        first, second = turns(agent, tmp_path, proxy)
    assert first and second
    assert_answered(first + second)
    prompt, cached = prompt_usage(second[-1])  # the turn itself (opencode also asks for a title first)
    assert prompt > 5000 and cached >= 0.9 * prompt, (agent, prompt, cached)


@pytest.mark.parametrize("agent", agents.AGENTS)
def test_a_tool_runs_and_its_result_comes_back_in_a_real_request(
    agent: str, installed: Path, server: Server, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    script = agent_scripts.tool_loop(agent, work, MODEL)
    with RecordingProxy(server.port, script) as proxy:
        run = session(agent, tmp_path, proxy).turn("Read notes.txt and tell me what it says.")
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-2000:])
    posts = [e for e in proxy.exchanges if e.method == "POST"]
    scripted = next(n for n, e in enumerate(posts) if e.scripted)
    after = [e for e in posts[scripted + 1 :] if e.json().get("tools")]
    assert after, "the agent sent nothing after its tool ran"
    follow_up = after[0]
    assert agent_scripts.MARKER.encode() in follow_up.body, follow_up.body[-3000:]  # the tool's result
    assert_answered(posts[scripted + 1 :])
    assert "Hello" in run.stdout


def test_two_sessions_at_once_each_keep_their_cache(installed: Path, server: Server, tmp_path: Path) -> None:
    results: dict[str, Any] = {}
    with RecordingProxy(server.port) as proxy:

        def run(agent: str) -> None:
            try:
                results[agent] = turns(agent, tmp_path / agent, proxy)
            except BaseException as exc:  # noqa: BLE001 - reported by the test's thread below
                results[agent] = exc

        threads = [threading.Thread(target=run, args=(agent,)) for agent in ("claude", "codex")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
    for agent in ("claude", "codex"):
        assert not isinstance(results[agent], BaseException), results[agent]
        first, second = results[agent]
        assert_answered(first + second)
        prompt, cached = prompt_usage(second[-1])
        assert cached >= 0.9 * prompt, (agent, prompt, cached)
