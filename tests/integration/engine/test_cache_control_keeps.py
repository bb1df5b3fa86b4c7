"""Anthropic's `cache_control` keeps its prefix cached: the host cache holds it over others until its ttl.

One sequence and a host cache with room for one conversation's state: every new conversation
pushes the last one out of the sequence into the host cache, and out of the host cache the
one before. A system prompt sent without a breakpoint is gone after two other conversations
(its next question evaluates it again); the same with `cache_control` stays, and its next
question reads it from the cache, through the anthropic SDK.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import anthropic
import pytest

from harness.servers import Server

MODEL = "SmolLM2-135M-Instruct.Q4_1"


@pytest.fixture(scope="module")
def client() -> Iterator[anthropic.Anthropic]:
    # 4 MiB holds about 180 tokens of SmolLM2's state: one of these conversations, not two.
    server = Server(LLM_WORKERS="1", LLM_PARALLEL="1", LLM_CACHE_RAM_MB="4").wait_ready()
    with anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0) as opened:
        yield opened
    server.stop(wait=False)


def system_prompt(topic: str) -> str:
    return f"Session {uuid.uuid4().hex}. You are a careful tutor of {topic}. " + "Answer briefly. " * 24


def others(client: anthropic.Anthropic) -> None:
    """Two other conversations of about the same size, one after the other."""
    for topic in ("astronomy", "botany"):
        client.messages.create(
            model=MODEL,
            max_tokens=4,
            system=system_prompt(topic),
            messages=[{"role": "user", "content": "Hi."}],
        )


def read_back(client: anthropic.Anthropic, marked: bool) -> int:
    """Cached tokens of a system prompt's second question, after two other conversations."""
    text = system_prompt("geography")
    system = [{"type": "text", "text": text, **({"cache_control": {"type": "ephemeral"}} if marked else {})}]
    first = [{"role": "user", "content": "Which river flows through Vienna?"}]
    second = [{"role": "user", "content": "Which river flows through Paris?"}]
    usage = client.messages.create(model=MODEL, max_tokens=4, system=system, messages=first).usage
    assert (usage.cache_creation_input_tokens or 0) > (100 if marked else -1)
    others(client)
    again = client.messages.create(model=MODEL, max_tokens=4, system=system, messages=second).usage
    return again.cache_read_input_tokens or 0


def test_a_marked_prefix_outlasts_other_conversations_and_an_unmarked_one_does_not(
    client: anthropic.Anthropic,
) -> None:
    assert read_back(client, marked=False) < 10  # only the template's opening: evicted
    assert read_back(client, marked=True) > 100  # the system prompt, kept
