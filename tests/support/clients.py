"""The SDK clients the tests drive a server with, set up one way: no retries, so every error is seen."""

from __future__ import annotations

import openai

from harness.servers import Service

# One tool in OpenAI's (and Ollama's) shape, for tests that offer a model a function to call.
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def openai_client(server: Service) -> openai.OpenAI:
    """The openai SDK on `server`'s /v1 (keys off: any key will do)."""
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
