"""The official openai, Anthropic and Ollama Node libraries (npm, installed by the tests) on the server."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.servers import Server
from tests.support.busy import model_busy

pytestmark = pytest.mark.external

NODE_DIR = Path(__file__).resolve().parents[2] / "node"


@pytest.fixture(scope="session")
def node_sdk() -> Path:
    """Install the pinned SDKs (package-lock.json) once per session."""
    assert shutil.which("node") and shutil.which("npm"), "Node.js and npm are needed (.ci/run installs them)"
    if not all(
        (NODE_DIR / "node_modules" / name).is_dir() for name in ("openai", "@anthropic-ai/sdk", "ollama")
    ):
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, check=True, timeout=300)
    return NODE_DIR / "sdk_client.mjs"


def run_node(script: Path, server: Server, mode: str = "", base: str = "/v1") -> dict[str, Any]:
    result = subprocess.run(
        ["node", str(script), server.url + base, mode], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_node_stream_equals_whole_and_ignores_keepalives(
    node_sdk: Path, start_server: Callable[..., Server]
) -> None:
    server = start_server(LLM_PARALLEL="1", LLM_SSE_KEEPALIVE="0.2")
    whole = run_node(node_sdk, server, "whole")
    with model_busy(server.port, {"prompt": "1, 2,", "max_tokens": 150, "stream": True}) as ended:
        streamed = run_node(node_sdk, server, "stream")  # queued: keep-alives come first
        assert ended.wait(5)
    assert streamed.get("error") is None, streamed
    assert streamed["text"] == whole["text"] and streamed["text"]
    assert streamed["roles"] == ["assistant"] and streamed["finish"] == whole["finish"]
    assert streamed["usage"]["completion_tokens"] > 0


def test_node_raises_api_error_on_an_error_event(node_sdk: Path, start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_PARALLEL="1", LLM_QUEUE_TIMEOUT="1", LLM_SSE_KEEPALIVE="0.3")
    with model_busy(server.port):
        streamed = run_node(node_sdk, server, "stream")
    assert streamed["error"]["isAPIError"] is True, streamed
    assert "waited" in streamed["error"]["message"]


def test_node_responses_stream(node_sdk: Path, server: Server) -> None:
    seen = run_node(node_sdk.with_name("responses_client.mjs"), server)
    assert seen["types"][:2] == ["response.created", "response.in_progress"]
    assert seen["types"][-1] in ("response.completed", "response.incomplete")
    assert seen["sequence"] == list(range(len(seen["sequence"])))
    (message,) = seen["final"]["output"]
    assert seen["text"] and message["content"][0]["text"] == seen["text"]


def test_node_anthropic_messages(node_sdk: Path, server: Server) -> None:
    seen = run_node(node_sdk.with_name("anthropic_client.mjs"), server, base="")
    assert seen["whole"]["text"] and seen["whole"]["stop"] in ("end_turn", "max_tokens")
    streamed = seen["streamed"]
    assert streamed["text"] == streamed["final"] == seen["whole"]["text"]
    assert streamed["id"].startswith("msg_") and streamed["output_tokens"] > 0


def test_ollama_node_library_chat_whole_and_streamed(node_sdk: Path, server: Server) -> None:
    script = NODE_DIR / "ollama_client.mjs"
    model = httpx.get(server.url + "/api/tags", timeout=10).json()["models"][0]["model"]
    ran = [subprocess.run(["node", str(script), server.url, model, mode], capture_output=True, text=True,
                          timeout=120) for mode in ("whole", "stream")]  # fmt: skip
    for result in ran:
        assert result.returncode == 0, result.stdout + result.stderr
    whole, streamed = (json.loads(result.stdout.strip().splitlines()[-1]) for result in ran)
    assert whole["done"] and whole["text"] and whole["models"] == [model]
    assert streamed["done"] and streamed["text"] == whole["text"] and streamed["parts"] > 2
    assert streamed["eval_count"] == whole["eval_count"]
