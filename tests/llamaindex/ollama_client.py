"""LlamaIndex's `Ollama` and `OllamaEmbedding` against the server, unchanged, in their own venv.

`python ollama_client.py <host> <chat model> <embedding model> <thinking model>` prints one JSON
line of what LlamaIndex made of each answer; the test asserts on it. LlamaIndex pins marshmallow
below 4 (through dataclasses-json), so it cannot share the server's venv (Makefile: install-test).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from llama_index.core.base.llms.types import ThinkingBlock, ToolCallBlock
from llama_index.core.llms import ChatMessage, TextBlock
from llama_index.core.prompts import PromptTemplate
from llama_index.core.tools import FunctionTool
from llama_index.embeddings.ollama import OllamaEmbedding
from llama_index.llms.ollama import Ollama
from pydantic import BaseModel, Field

HOST, CHAT, EMBED, THINKING = sys.argv[1:5]
GREEDY = {"seed": 7, "num_predict": 16}
ASK = [ChatMessage(role="user", content="Name a colour.")]


class Person(BaseModel):
    name: str = Field(max_length=20)  # a small model left alone may never close its string
    age: int


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny and 21 degrees in {city}."


def chats(llm: Ollama) -> dict[str, Any]:
    """Whole and streamed, sync and async, chat and completion: LlamaIndex's own defaults (its
    context window from /api/show, sent as num_ctx with every request)."""
    whole = llm.chat(ASK)
    streamed = list(llm.stream_chat(ASK))

    async def async_pair() -> tuple[str, str]:
        answer = await llm.achat(ASK)
        pieces = [piece.delta or "" async for piece in await llm.astream_chat(ASK)]
        return answer.message.content or "", "".join(pieces)

    async_whole, async_streamed = asyncio.run(async_pair())
    return {
        "context_window": llm.metadata.context_window,
        "whole": whole.message.content,
        "usage": whole.raw.get("usage"),
        "streamed": "".join(piece.delta or "" for piece in streamed),
        "streamed_pieces": len(streamed),
        "async_whole": async_whole,
        "async_streamed": async_streamed,
        "complete": llm.complete("Name a colour.").text,
        "stream_complete": "".join(piece.delta or "" for piece in llm.stream_complete("Name a colour.")),
    }


def structured(llm: Ollama) -> dict[str, Any]:
    """structured_predict sends the class's JSON schema as `format`."""
    person = llm.structured_predict(Person, PromptTemplate("Invent a person called {name}."), name="Ada")
    return person.model_dump()


def tools(llm: Ollama) -> dict[str, Any]:
    """A call forced by `format` (Ollama has no tool_choice), run, and its result answered."""
    tool = FunctionTool.from_defaults(fn=get_weather)
    call_shape = {"type": "object", "required": ["name", "arguments"], "properties": {
        "name": {"const": "get_weather"},
        "arguments": {"type": "object", "required": ["city"],
                      "properties": {"city": {"type": "string", "maxLength": 20}}},
    }}  # fmt: skip
    history = [ChatMessage(role="user", content="What is the weather in Paris?")]
    specs = [tool.metadata.to_openai_tool()]
    asked = llm.chat(history, tools=specs, format=call_shape)
    (selection,) = llm.get_tool_calls_from_response(asked)
    result = tool.call(**selection.tool_kwargs)
    history += [asked.message, ChatMessage(role="tool", content=str(result))]
    answer = llm.chat(history, tools=specs)
    calls = [block for block in asked.message.blocks if isinstance(block, ToolCallBlock)]
    answer_calls = [block for block in answer.message.blocks if isinstance(block, ToolCallBlock)]
    return {
        "name": selection.tool_name,
        "kwargs": selection.tool_kwargs,
        "text_of_call": asked.message.content,
        "calls": len(calls),
        "answer": answer.message.content,
        "answer_calls": [block.tool_name for block in answer_calls],
    }


def thinking(llm: Ollama) -> dict[str, Any]:
    """`thinking=True`: the reasoning comes back as LlamaIndex's ThinkingBlock, whole and streamed."""
    whole = llm.chat(ASK)
    streamed = list(llm.stream_chat(ASK))
    last = streamed[-1].message.blocks
    return {
        "thinking": "".join(b.content or "" for b in whole.message.blocks if isinstance(b, ThinkingBlock)),
        "text": "".join(b.text for b in whole.message.blocks if isinstance(b, TextBlock)),
        "streamed_thinking": "".join(b.content or "" for b in last if isinstance(b, ThinkingBlock)),
        "streamed_text": "".join(piece.delta or "" for piece in streamed),
        "thinking_deltas": sum(1 for piece in streamed if piece.additional_kwargs.get("thinking_delta")),
    }


def embeddings() -> dict[str, Any]:
    embedder = OllamaEmbedding(model_name=EMBED, base_url=HOST)
    one = embedder.get_text_embedding("the cat sat")
    batch = embedder.get_text_embedding_batch(["the cat sat", "a dog ran"])
    return {"one": one, "batch": batch, "query": embedder.get_query_embedding("the cat sat")}


def main() -> None:
    llm = Ollama(model=CHAT, base_url=HOST, request_timeout=120, temperature=0, additional_kwargs=GREEDY)
    report = {
        "chats": chats(llm),
        "structured": structured(Ollama(model=CHAT, base_url=HOST, request_timeout=120, temperature=0)),
        "tools": tools(
            Ollama(
                model=CHAT,
                base_url=HOST,
                request_timeout=120,
                temperature=0,
                additional_kwargs={"seed": 7, "num_predict": 64},
            )
        ),  # fmt: skip
        "thinking": thinking(
            Ollama(
                model=THINKING,
                base_url=HOST,
                request_timeout=120,
                temperature=0,
                thinking=True,
                additional_kwargs={"seed": 7, "num_predict": 40},
            )
        ),  # fmt: skip
        "embeddings": embeddings(),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
