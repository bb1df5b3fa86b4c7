"""`POST /infill` driven as llama.vscode drives it, beside llama-server on the same FIM-capable file.

The model is SmolLM2 with fill-in-the-middle tokens named in its metadata (harness/real_models.py):
real weights, so its answers are text, though no real infill. Each request is compared with
llama-server's answer to it: the same prompt tokens (the repo-level layout with other files'
chunks), the same content at temperature 0, the same stop type.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from harness import llama_server
from harness.real_models import smollm2_fim_path
from harness.servers import Server, Service
from tests.integration.conftest import assert_clean

N_CTX, N_BATCH = 2048, 512
PREFIX = "import math\n\n\ndef area(radius):\n    "
SUFFIX = "\n\n\ndef perimeter(radius):\n    return 2 * math.pi * radius\n"
CHUNKS = [
    {"filename": "shapes/square.py", "text": "def square_area(side):\n    return side * side\n"},
    {"filename": "shapes/README.md", "text": "Functions for the areas of shapes.\n"},
]


@pytest.fixture(scope="module")
def ours() -> Iterator[Server]:
    server = Server(
        LLM_MODEL_PATH=str(smollm2_fim_path()),
        LLM_WORKERS="1",
        LLM_N_CTX=str(N_CTX),
        LLM_N_BATCH=str(N_BATCH),
        LLM_BATCH_INVARIANT="1",  # compared with llama-server bit for bit
    ).wait_ready()
    yield server
    log = server.output()
    server.stop(wait=False)
    assert_clean(log)


@pytest.fixture(scope="module")
def reference() -> Iterator[Service]:
    extra = ("-b", str(N_BATCH))
    service = llama_server.start(str(smollm2_fim_path()), 1, 1, N_CTX, extra=extra, same_kernels=True)
    yield service
    service.stop()


def keystroke(prompt: str, **extra: Any) -> dict[str, Any]:
    """llama.vscode's request for a completion at the cursor (src/llama-server.ts), made greedy."""
    return {
        "input_prefix": PREFIX, "input_suffix": SUFFIX, "input_extra": CHUNKS, "prompt": prompt,
        "n_predict": 24, "top_k": 40, "top_p": 0.99, "stream": False,
        "samplers": ["top_k", "top_p", "infill", "temperature"], "temperature": 0,
        "cache_prompt": True, "t_max_prompt_ms": 500, "t_max_predict_ms": 1000, "n_indent": 4, **extra,
    }  # fmt: skip


def infill(url: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = httpx.post(url + "/infill", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_an_infill_is_llama_servers_prompt_and_answer(ours: Server, reference: Service) -> None:
    for body in (keystroke("return"), keystroke("", input_extra=[]), keystroke("", n_indent=0)):
        mine, theirs = infill(ours.url, body), infill(reference.url, body)
        assert mine["tokens_evaluated"] == theirs["tokens_evaluated"]  # the same prompt, chunks and all
        assert mine["content"] == theirs["content"], (mine, theirs)
        assert mine["stop_type"] == theirs["stop_type"]
        for key in ("content", "tokens_cached", "truncated", "timings", "generation_settings"):
            assert key in mine


def test_a_warm_up_request_evaluates_the_chunks_and_generates_nothing(
    ours: Server, reference: Service
) -> None:
    # What llama.vscode sends as chunks change, to have them cached before the next keystroke.
    warm = {"input_prefix": "", "input_suffix": "", "input_extra": CHUNKS, "prompt": "", "n_predict": 0,
            "samplers": [], "cache_prompt": True, "t_max_prompt_ms": 500, "t_max_predict_ms": 1}  # fmt: skip
    mine, theirs = infill(ours.url, warm), infill(reference.url, warm)
    assert mine["tokens_evaluated"] == theirs["tokens_evaluated"]
    # llama-server samples one token even so (its budget is checked after a first token); none here.
    assert mine["content"] == "" and mine["tokens_predicted"] == 0 and mine["stop_type"] == "limit"
    assert theirs["tokens_predicted"] == 1


def test_keystrokes_are_answered_from_the_cache(ours: Server) -> None:
    typed = ""
    cached = []
    for char in "return m":
        typed += char
        answer = infill(ours.url, keystroke(typed, n_predict=4))
        cached.append((answer["tokens_cached"], answer["tokens_evaluated"]))
    # After the first, each keystroke reuses the prompt up to the typed text: the other files'
    # chunks and the prefix (the suffix after it is evaluated again: no KV shifting here yet).
    suffix = len(httpx.post(ours.url + "/tokenize", json={"content": SUFFIX}, timeout=10).json()["tokens"])
    assert all(hit >= evaluated - suffix - len(typed) - 2 for hit, evaluated in cached[1:]), cached
    assert cached[0][0] < cached[1][0]


def test_the_answer_shape_streams_and_errors_are_llama_servers(ours: Server, server: Server) -> None:
    with httpx.stream("POST", ours.url + "/infill", json=keystroke("", stream=True), timeout=120) as streamed:
        events = [line for line in streamed.iter_lines() if line.startswith("data: ")]
    assert events[-1].startswith('data: {"index":0,"content":"","id_slot":-1,"stop":true')
    missing = httpx.post(ours.url + "/infill", json={"input_suffix": ""}, timeout=30)
    assert missing.status_code == 400 and missing.json()["error"]["param"] == "input_prefix"
    bad_chunk = httpx.post(
        ours.url + "/infill", json=keystroke("", input_extra=[{"filename": "a"}]), timeout=30
    )
    assert bad_chunk.status_code == 400 and bad_chunk.json()["error"]["param"].startswith("input_extra")
    # The default model has no FIM tokens: llama-server's 501, naming what is missing.
    refused = httpx.post(server.url + "/infill", json=keystroke(""), timeout=30)
    assert refused.status_code == 501, refused.text
    assert refused.json()["error"]["message"].startswith(
        "Infill is not supported by this model: prefix token"
    )
