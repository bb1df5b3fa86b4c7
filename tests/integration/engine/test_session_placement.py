"""An agent's side requests between two turns (a title, a quota probe, a small model's call) leave the
session's conversation in its cells: its next turn reads all of it from the cache.

Two sequences and no host cache, so a sequence a side request takes loses its cells for good
(nothing comes back from host memory to hide it). The same traffic without a session id takes the
least recently used sequence, the conversation's: that contrast is what the session id buys.
"""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import openai
import pytest

from harness.servers import Server
from tests.integration.conftest import assert_clean

MODEL = "SmolLM2-135M-Instruct.Q4_1"
# Claude Code opens every request's system prompt alike, its side requests' too.
BILLING = "x-anthropic-billing-header: cc_version=2.1.328.a1b; cc_entrypoint=sdk-cli;"
AGENT = "You are Claude Code, a command line coding agent. "
SIDE_SYSTEM: list = [
    {"type": "text", "text": BILLING},
    {"type": "text", "text": AGENT + "Answer in five words."},
]


def rules(project: str) -> str:
    """A conversation's system prompt of about 450 tokens: each test its own, past the agent's opening."""
    return (
        AGENT
        + f"Project {project}. "
        + " ".join(f"Rule {n}: keep every file tidy and tested." for n in range(40))
    )


SIDE_PROMPTS = [
    "Write a title for this conversation: fix the parser.",
    "quota",
    "Is `ls -la` a safe command?",
]


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    started = Server(
        LLM_WORKERS="1", LLM_PARALLEL="2", LLM_CACHE_RAM_MB="0", LLM_SPEC_TYPE="none"
    ).wait_ready()
    yield started
    log = started.output()
    started.stop(wait=False)
    assert_clean(log)


def claude_turns(server: Server, session: str | None, project: str) -> tuple[int, int]:
    """Turn one, three side requests, turn two (Claude Code's shape): turn one's prompt tokens, and
    how many of turn two's were read from the cache."""
    headers = {"X-Claude-Code-Session-Id": session} if session else {}
    sdk = anthropic.Anthropic(base_url=server.url, api_key="unused", default_headers=headers, max_retries=0)
    history: list[anthropic.types.MessageParam] = [{"role": "user", "content": "Fix the parser, please."}]
    system: list = [{"type": "text", "text": BILLING}, {"type": "text", "text": rules(project)}]
    first = sdk.messages.create(model=MODEL, system=system, messages=history, max_tokens=8)
    for side in SIDE_PROMPTS:  # short prompts sharing their first tokens with the conversation
        sdk.messages.create(
            model=MODEL, system=SIDE_SYSTEM, messages=[{"role": "user", "content": side}], max_tokens=4
        )
    history += [
        {"role": "assistant", "content": first.content[0].text},
        {"role": "user", "content": "Now run the tests."},
    ]
    second = sdk.messages.create(model=MODEL, system=system, messages=history, max_tokens=4)
    usage = first.usage
    prompt = (
        usage.input_tokens + (usage.cache_creation_input_tokens or 0) + (usage.cache_read_input_tokens or 0)
    )
    return prompt, second.usage.cache_read_input_tokens or 0


def test_claude_codes_side_requests_leave_the_sessions_next_turn_fully_cached(server: Server) -> None:
    prompt, cached = claude_turns(server, "0f4c2a1e-session-one", "parser")
    assert prompt > 400
    assert cached >= prompt - 2, (prompt, cached)  # all of turn one, but its tail the template may redo


def test_without_a_session_id_the_same_side_requests_take_the_conversations_cells(server: Server) -> None:
    prompt, cached = claude_turns(server, None, "linker")
    # A side request sharing the agent's opening took the conversation's sequence (llama-server's
    # rule: the free sequence sharing most of a prompt, once it shares a tenth of it).
    assert cached < prompt / 4, (prompt, cached)


def test_a_prompt_cache_key_keeps_an_openai_clients_conversation_alike(server: Server) -> None:
    sdk = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    messages: list = [
        {"role": "system", "content": rules("lexer")},
        {"role": "user", "content": "Fix the parser."},
    ]
    first = sdk.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=8, temperature=0, prompt_cache_key="codex-session-7"
    )
    for prompt in SIDE_PROMPTS:
        sdk.chat.completions.create(
            model=MODEL, max_tokens=4, temperature=0,
            messages=[{"role": "system", "content": AGENT + "Answer in five words."},
                      {"role": "user", "content": prompt}],
            prompt_cache_key="codex-session-7",
        )  # fmt: skip
    messages += [{"role": "assistant", "content": first.choices[0].message.content},
                 {"role": "user", "content": "Now run the tests."}]  # fmt: skip
    second = sdk.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=4, temperature=0, prompt_cache_key="codex-session-7"
    )
    assert first.usage is not None and second.usage is not None and second.usage.prompt_tokens_details
    assert second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens - 2
