"""The Conversations API through the openai SDK and the Agents SDK's conversation session, on both stores."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest

from harness.servers import Server
from tests.integration.conftest import store_sdk as sdk

MODEL = "SmolLM2-135M-Instruct.Q4_1"


def _texts(items: Any) -> list[str]:
    return [item.content[0].text for item in items]


def test_a_conversation_and_its_items_are_created_listed_and_deleted(store_server: Server) -> None:
    client = sdk(store_server)
    words = ["one", "two", "three"]
    conversation = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": w} for w in words], metadata={"topic": "count"}
    )
    assert conversation.id.startswith("conv_") and conversation.metadata == {"topic": "count"}
    assert client.conversations.retrieve(conversation.id).id == conversation.id
    added = client.conversations.items.create(
        conversation.id, items=[{"type": "message", "role": "assistant", "content": "four"}]
    )
    assert _texts(added.data) == ["four"] and added.data[0].id.startswith("msg_")
    newest = client.conversations.items.list(conversation.id, limit=2)
    assert _texts(newest.data) == ["four", "three"] and newest.has_more
    assert _texts(client.conversations.items.list(conversation.id, order="asc", limit=1)) == [*words, "four"]
    first = client.conversations.items.list(conversation.id, order="asc").data[0]
    assert client.conversations.items.retrieve(first.id, conversation_id=conversation.id).id == first.id
    after = client.conversations.items.delete(first.id, conversation_id=conversation.id)
    assert after.id == conversation.id
    assert _texts(client.conversations.items.list(conversation.id, order="asc")) == ["two", "three", "four"]
    updated = client.conversations.update(conversation.id, metadata={"topic": "numbers"})
    assert updated.metadata == {"topic": "numbers"}
    client.conversations.delete(conversation.id)
    with pytest.raises(openai.NotFoundError):
        client.conversations.retrieve(conversation.id)


def test_responses_in_a_conversation_read_it_and_extend_it(store_server: Server) -> None:
    client = sdk(store_server)
    conversation = client.conversations.create()
    first = client.responses.create(
        model=MODEL, input="My name is Ada.", conversation=conversation.id, max_output_tokens=6, temperature=0
    )
    second = client.responses.create(
        model=MODEL, input="What is my name?", conversation={"id": conversation.id}, max_output_tokens=6
    )
    assert second.conversation is not None and second.conversation.id == conversation.id
    items = client.conversations.items.list(conversation.id, order="asc").data
    assert [(i.type, i.role) for i in items] == [("message", "user"), ("message", "assistant")] * 2
    assert items[1].id == first.output[0].id and _texts(items[1:2]) == [first.output_text]
    written_out = [
        {"role": "user", "content": "My name is Ada."},
        {"role": "assistant", "content": first.output_text},
        {"role": "user", "content": "What is my name?"},
    ]
    counted = client.responses.input_tokens.count(model=MODEL, input=written_out)
    assert second.usage is not None and second.usage.input_tokens == counted.input_tokens
    # The count of a turn that continues the conversation is the same, without writing it out.
    continued = client.responses.input_tokens.count(model=MODEL, input=[], conversation=conversation.id)
    assert continued.input_tokens > counted.input_tokens  # now with the second answer too
    with pytest.raises(openai.BadRequestError) as both:
        client.responses.create(
            model=MODEL, input="Hi", conversation=conversation.id, previous_response_id=second.id
        )
    assert both.value.body["param"] == "conversation"


def test_another_key_finds_no_conversation(store_server: Server) -> None:
    alice, bob = sdk(store_server), sdk(store_server, "key-bob")
    conversation = alice.conversations.create(items=[{"role": "user", "content": "mine"}])
    for ask in (
        lambda: bob.conversations.retrieve(conversation.id),
        lambda: bob.conversations.items.list(conversation.id),
        lambda: bob.conversations.items.create(conversation.id, items=[{"role": "user", "content": "x"}]),
        lambda: bob.conversations.delete(conversation.id),
        lambda: bob.responses.create(model=MODEL, input="Hi", conversation=conversation.id),
    ):
        with pytest.raises(openai.NotFoundError):
            ask()
    assert _texts(alice.conversations.items.list(conversation.id).data) == ["mine"]


def test_bad_items_and_queries_are_clear_400s(store_server: Server) -> None:
    client = sdk(store_server)
    conversation = client.conversations.create()
    with pytest.raises(openai.BadRequestError) as too_many:
        client.conversations.items.create(conversation.id, items=[{"role": "user", "content": "x"}] * 21)
    assert too_many.value.body["param"] == "items"
    with pytest.raises(openai.BadRequestError) as bad_role:
        client.conversations.create(items=[{"role": "robot", "content": "x"}])
    assert bad_role.value.body["param"].startswith("items")
    with pytest.raises(openai.BadRequestError) as after:
        client.conversations.items.list(conversation.id, after="msg_nope")
    assert after.value.body["param"] == "after"


def test_the_agents_sdk_keeps_its_session_in_a_conversation(store_server: Server) -> None:
    import agents  # the openai Agents SDK's OpenAIConversationsSession, on this server

    agents.set_tracing_disabled(True)  # its traces would go to OpenAI's servers
    client = openai.AsyncOpenAI(base_url=store_server.url + "/v1", api_key="key-alice", max_retries=0)
    agent = agents.Agent(
        name="memory",
        instructions="Answer in one short sentence.",
        model=agents.OpenAIResponsesModel(model=MODEL, openai_client=client),
        # Room to finish: the SDK takes an answer cut at max_output_tokens for a failure.
        model_settings=agents.ModelSettings(temperature=0, max_tokens=400),
    )

    async def run() -> tuple[list[Any], str]:
        async with client:
            session = agents.OpenAIConversationsSession(openai_client=client)
            await agents.Runner.run(agent, "My name is Ada.", session=session)
            await agents.Runner.run(agent, "What is my name?", session=session)
            return await session.get_items(), await session._get_session_id()

    items, conversation_id = asyncio.run(run())
    assert [item.get("role") for item in items] == ["user", "assistant", "user", "assistant"]
    kept = sdk(store_server).conversations.items.list(conversation_id, order="asc").data
    assert [(i.type, i.role) for i in kept] == [
        ("message", r) for r in ("user", "assistant", "user", "assistant")
    ]
