"""llama-server's context shift on the real server: a generation past the context's end, token for token
as llama-server's `--context-shift` on the same GGUF, and shifted cells never resumed by a later prompt.

Without LLM_CONTEXT_SHIFT, asking for more than the context holds is a 400 (test_llama_completion).
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from app.settings.values import default_model_path
from harness import llama_server
from harness.servers import Server, Service

N_CTX = 256  # llama-server's context is a multiple of 256 (llama.cpp pads it): the same here
PREDICT = 400  # two shifts
PROMPT = "Once upon a time, in a village at the edge of a great forest, there lived an old clockmaker who"


@pytest.fixture(scope="module")
def ours() -> Iterator[Server]:
    server = Server(
        LLM_WORKERS="1",
        LLM_PARALLEL="1",
        LLM_N_CTX=str(N_CTX),
        LLM_N_THREADS="1",
        LLM_CONTEXT_SHIFT="1",
        LLM_BATCH_INVARIANT="1",  # compared with llama-server bit for bit
    ).wait_ready()
    yield server
    server.stop(wait=False)


@pytest.fixture(scope="module")
def reference() -> Iterator[Service]:
    service = llama_server.start(
        default_model_path(), threads=1, slots=1, n_ctx=N_CTX, extra=("--context-shift",), same_kernels=True
    )
    yield service
    service.stop()


def complete(url: str, **body: object) -> dict:
    request = {"prompt": PROMPT, "temperature": 0, "ignore_eos": True, "cache_prompt": True, **body}
    answer = httpx.post(url + "/completion", json=request, timeout=300)
    assert answer.status_code == 200, answer.text
    return answer.json()


@pytest.mark.parametrize("shift", [{"n_keep": 8}, {"n_keep": -1, "n_discard": 40}])
def test_a_generation_past_the_context_shifts_as_llama_servers(
    ours: Server, reference: Service, shift: dict[str, int]
) -> None:
    mine, theirs = (complete(url, n_predict=PREDICT, **shift) for url in (ours.url, reference.url))
    assert mine["tokens_predicted"] == theirs["tokens_predicted"] == PREDICT  # past the end, twice over
    assert mine["truncated"] is theirs["truncated"] is True
    assert mine["content"] == theirs["content"]


def test_shifted_cells_are_never_resumed(ours: Server) -> None:
    shifted = complete(ours.url, n_predict=N_CTX, n_keep=8)
    assert shifted["tokens_evaluated"] > 8
    again = complete(ours.url, n_predict=6)
    # Only the kept tokens' cells are as a fresh evaluation left them: the rest of the prompt is evaluated.
    assert again["tokens_cached"] == 8
    assert shifted["content"].startswith(again["content"])  # as before the shift: the same first tokens
