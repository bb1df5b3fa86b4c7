"""llama-server's --cache-reuse on the real server: an editor's next request after an edit in the middle
of its prompt moves the cached chunks after the edit instead of evaluating them, as llama-server does.

Driven as llama.vscode drives /infill (other files' chunks, then the text around the cursor),
beside llama-server with `--cache-reuse` on the same FIM-capable file: each request evaluates as
many prompt tokens as llama-server's and answers the same at temperature 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from harness import llama_server
from harness.real_models import smollm2_fim_path
from harness.servers import Server, Service

N_CTX, N_BATCH, MIN_CHUNK = 2048, 512, 16
SQUARE = {"filename": "shapes/square.py", "text": "def square_area(side):\n    return side * side\n" * 3}
CIRCLE = {
    "filename": "shapes/circle.py",
    "text": "import math\n\n\ndef circle_area(r):\n    return math.pi * r * r\n" * 3,
}
README = {
    "filename": "shapes/README.md",
    "text": "Functions for the areas of shapes, one module per shape.\n" * 3,
}
PREFIX = "import math\n\n\n# Areas.\n\n\ndef area(radius):\n    "
SUFFIX = "\n\n\ndef perimeter(radius):\n    return 2 * math.pi * radius\n"


@pytest.fixture(scope="module")
def ours() -> Iterator[Server]:
    server = Server(
        LLM_MODEL_PATH=str(smollm2_fim_path()),
        LLM_WORKERS="1",
        LLM_PARALLEL="1",
        LLM_N_CTX=str(N_CTX),
        LLM_N_BATCH=str(N_BATCH),
        LLM_CACHE_REUSE=str(MIN_CHUNK),
        LLM_BATCH_INVARIANT="1",  # compared with llama-server bit for bit
    ).wait_ready()
    yield server
    server.stop(wait=False)


@pytest.fixture(scope="module")
def reference() -> Iterator[Service]:
    extra = ("-b", str(N_BATCH), "--cache-reuse", str(MIN_CHUNK))
    service = llama_server.start(str(smollm2_fim_path()), 1, 1, N_CTX, extra=extra, same_kernels=True)
    yield service
    service.stop()


def infill(url: str, chunks: list[dict[str, str]], prefix: str) -> dict[str, Any]:
    body = {
        "input_prefix": prefix, "input_suffix": SUFFIX, "input_extra": chunks, "prompt": "return",
        "n_predict": 12, "samplers": ["top_k", "infill", "temperature"], "top_k": 40, "temperature": 0,
        "cache_prompt": True, "stream": False,
    }  # fmt: skip
    answer = httpx.post(url + "/infill", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_an_edit_in_the_middle_reuses_the_chunks_after_it_as_llama_server(
    ours: Server, reference: Service
) -> None:
    edits = [
        ([SQUARE, CIRCLE, README], PREFIX),
        ([SQUARE, README], PREFIX),  # a file's chunk gone: the ones after it move up
        ([SQUARE, README], PREFIX.replace("# Areas.\n\n\n", "")),  # a line deleted above the cursor
    ]
    evaluated = []
    for chunks, prefix in edits:
        mine, theirs = infill(ours.url, chunks, prefix), infill(reference.url, chunks, prefix)
        assert mine["tokens_evaluated"] == theirs["tokens_evaluated"]  # the same prompt
        assert mine["timings"]["prompt_n"] == theirs["timings"]["prompt_n"], (
            mine["timings"],
            theirs["timings"],
        )
        assert mine["content"] == theirs["content"]
        evaluated.append((mine["timings"]["prompt_n"], mine["tokens_evaluated"]))
    # After each edit, far fewer tokens were evaluated than the prompt holds: the rest was moved.
    for prompt_n, whole in evaluated[1:]:
        assert prompt_n < whole / 3, evaluated
