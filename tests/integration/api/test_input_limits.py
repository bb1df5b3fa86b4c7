"""Every numeric field of every generating route, at and past its limits, one at a time, on the real
server (context shift on, so that n_keep and n_discard are live): a 200 or a clear 4xx in the
route's shape, never a 500; afterwards no worker has crashed and no sequence is held.

llama-server's `n_discard: -32` broke its memory (CVE-2026-21869); here each field is tried
alone with values a client may send by mistake or on purpose. Slow tier: about 1,500 requests.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from harness.real_models import smollm2_fim_path
from harness.servers import Server
from tests.support.security import LEAKS

pytestmark = pytest.mark.slow

MODEL = "SmolLM2-135M-Instruct.Q4_1"
CHAT = [{"role": "user", "content": "Count: 1, 2,"}]
OLLAMA = {"model": MODEL, "stream": False, "options": {"num_predict": 2}}
# Each generating route, its smallest body, and where its numbers go (Ollama's in `options`).
ROUTES: dict[str, tuple[dict[str, Any], str | None]] = {
    "/v1/chat/completions": ({"messages": CHAT, "max_tokens": 2}, None),
    "/v1/completions": ({"prompt": "1, 2,", "max_tokens": 2}, None),
    "/v1/responses": ({"model": MODEL, "input": "1, 2,", "max_output_tokens": 16, "store": False}, None),
    "/v1/messages": ({"model": MODEL, "messages": CHAT, "max_tokens": 2}, None),
    "/completion": ({"prompt": "1, 2,", "n_predict": 2}, None),
    "/infill": ({"input_prefix": "def f(", "input_suffix": "):\n", "n_predict": 2}, None),
    "/api/chat": ({**OLLAMA, "messages": CHAT}, "options"),
    "/api/generate": ({**OLLAMA, "prompt": "1, 2,"}, "options"),
}  # fmt: skip
FIELDS = (
    "max_tokens", "max_completion_tokens", "max_output_tokens", "n_predict", "num_predict", "n",
    "temperature", "top_p", "top_k", "min_p", "typical_p", "seed", "n_keep", "n_discard", "num_keep",
    "logprobs", "top_logprobs", "n_probs", "presence_penalty", "frequency_penalty", "repeat_penalty",
    "repeat_last_n", "min_keep", "dry_multiplier", "dry_allowed_length", "dry_penalty_last_n",
    "xtc_probability",
    "mirostat", "mirostat_tau", "priority", "num_ctx", "speculative.n_max", "t_max_predict_ms", "n_indent",
    "min_tokens", "thinking_budget_tokens",
)  # fmt: skip
VALUES = (-(2**63), -32, -1, 0, 1.5, 2**31, 2**64, 1e308, "7", True, None)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    instance = Server(  # SmolLM2 with its fill-in-the-middle tokens named: /infill serves too
        LLM_MODEL_PATH=str(smollm2_fim_path()),
        LLM_MODEL_ID=MODEL,
        LLM_WORKERS="1",
        LLM_CONTEXT_SHIFT="1",
        LLM_PARALLEL="2",
        LLM_N_CTX="256",
        LLM_DEFAULT_MAX_TOKENS="4",  # an answer whose length the request leaves open
        LLM_MAX_GENERATION_SECONDS="3",  # and one asked to be endless (-1), with context shift on
    ).wait_ready()
    yield instance
    log = instance.output()
    instance.stop(wait=False)
    assert "Traceback" not in log and log.count("Booting worker") == 1


def test_every_numeric_field_of_every_generating_route_at_and_past_its_limits(server: Server) -> None:
    tried = 0
    with httpx.Client(base_url=server.url, timeout=120) as client:
        for path, (base, nest) in ROUTES.items():
            for field in FIELDS:
                for value in VALUES:
                    body = json.loads(json.dumps(base))
                    (body[nest] if nest else body)[field] = value
                    answer = client.post(path, json=body)
                    what = (path, field, value, answer.status_code, answer.text[:300])
                    assert answer.status_code in (200, 400, 404, 413, 422), what
                    if answer.status_code != 200:
                        assert not LEAKS.search(answer.text), what
                        error = answer.json()["error"]
                        assert error if isinstance(error, str) else error["message"], what
                    tried += 1
        slots = client.get("/slots").json()
        assert not any(slot["is_processing"] for slot in slots)  # every sequence given back
        assert (
            client.post("/v1/chat/completions", json={"messages": CHAT, "max_tokens": 3}).status_code == 200
        )
    assert tried == len(ROUTES) * len(FIELDS) * len(VALUES)
    print(f"\ninput limits: {tried} route x field x value cases")
