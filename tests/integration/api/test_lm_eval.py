"""lm-evaluation-harness scores the model through /v1/completions, and agrees with llama-cpp-python itself.

lm-eval's `local-completions` model, with the server's own tokenizer (`/tokenizer_info`,
`/tokenize`), sends prompts as token ids with `echo` and `logprobs` and reads the
prompt's log-probabilities back; no dataset is downloaded: the requests are built here.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from llama_cpp import Llama

from app.settings.values import default_model_path
from harness.servers import Server

MODEL = "SmolLM2-135M-Instruct.Q4_1"
PAIRS = [
    ("The capital of France is", " Paris"),
    ("The capital of France is", " a small fish"),
    ("One, two, three,", " four"),
    ("Water boils at a hundred degrees", " Celsius."),
]


@pytest.fixture(scope="module")
def lm(server: Server) -> Iterator[object]:
    with warnings.catch_warnings():  # lm-eval's own imports warn (deprecations in its dependencies)
        warnings.simplefilter("ignore")
        from lm_eval.models.openai_completions import LocalCompletionsAPI

        yield LocalCompletionsAPI(
            base_url=server.url + "/v1/completions", model=MODEL, tokenizer_backend="auto", max_length=512
        )


def instances(kind: str, arguments: list[tuple]) -> list[object]:
    from lm_eval.api.instance import Instance

    return [Instance(request_type=kind, doc={}, arguments=args, idx=i) for i, args in enumerate(arguments)]


def reference(server: Server, context: str, continuation: str) -> tuple[float, bool]:
    """The continuation's log-probability and greediness from llama-cpp-python on the same tokens."""
    tokenize = lambda text: httpx.post(  # noqa: E731 - the very tokens lm-eval sends
        server.url + "/tokenize", json={"prompt": text, "add_special_tokens": False}, timeout=30
    ).json()["tokens"]
    head, tail = tokenize(context), tokenize(continuation)
    tokens = head + tail
    llama = _llama()
    llama.reset()
    llama.eval(tokens)
    logits = np.array(llama.scores[: len(tokens)], dtype=np.float64)
    logprobs = (
        logits
        - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1, keepdims=True))
        - logits.max(1, keepdims=True)
    )
    rows = range(len(head) - 1, len(tokens) - 1)
    total = sum(logprobs[row, tokens[row + 1]] for row in rows)
    greedy = all(logprobs[row].argmax() == tokens[row + 1] for row in rows)
    return float(total), greedy


_LLAMA: list[Llama] = []


def _llama() -> Llama:
    if not _LLAMA:
        # With flash attention, as the server's default kernels run (llama.cpp's fastest).
        model = default_model_path()
        _LLAMA.append(Llama(model_path=model, n_ctx=512, logits_all=True, flash_attn=True, verbose=False))
    return _LLAMA[0]


def test_loglikelihood_matches_llama_cpp_python(lm: Any, server: Server) -> None:
    assert lm.tokenizer_backend == "remote"  # found /tokenizer_info and /tokenize by itself
    results = lm.loglikelihood(instances("loglikelihood", PAIRS))
    assert len(results) == len(PAIRS)
    for (context, continuation), (logprob, greedy) in zip(PAIRS, results, strict=True):
        expected, expected_greedy = reference(server, context, continuation)
        # The same tokens through another context (batch shape, cache layout): close, not bit-equal.
        assert logprob == pytest.approx(expected, abs=0.01), (context, continuation)
        assert greedy == expected_greedy
    # The likelier continuation scores higher, as it should.
    assert results[0][0] > results[1][0]


def test_generate_until(lm: Any) -> None:
    (answer,) = lm.generate_until(
        instances("generate_until", [("1, 2, 3, 4,", {"until": [","], "max_gen_toks": 8})])
    )
    assert answer.strip() == "5"


def test_token_prompts_echo_and_nothing_generated(server: Server) -> None:
    tokens = httpx.post(server.url + "/tokenize", json={"content": "Hello there, friend"}, timeout=30).json()[
        "tokens"
    ]
    body = {"prompt": tokens, "max_tokens": 0, "echo": True, "logprobs": 2}
    choice = httpx.post(server.url + "/v1/completions", json=body, timeout=60).json()["choices"][0]
    assert choice["text"] == "Hello there, friend" and choice["finish_reason"] == "length"
    scored = choice["logprobs"]
    assert len(scored["tokens"]) == len(tokens) and scored["token_logprobs"][0] is None
    assert all(lp <= 0 for lp in scored["token_logprobs"][1:]) and scored["top_logprobs"][0] is None
    # The two likeliest, and the prompt's own token beside them where it is not one (OpenAI's: up to
    # logprobs + 1), which is how lm-eval tells a greedy continuation from another.
    scored_tokens = zip(
        scored["tokens"][1:], scored["token_logprobs"][1:], scored["top_logprobs"][1:], strict=True
    )
    assert all(top[token] == logprob and len(top) <= 3 for token, logprob, top in scored_tokens)
    streamed = httpx.post(server.url + "/v1/completions", json={**body, "stream": True}, timeout=60).text
    assert '"token_logprobs":[null,' in streamed
    for bad, param in (({"prompt": [1, 10**7]}, "prompt"), ({"prompt": "Hi", "max_tokens": 0}, "max_tokens")):
        response = httpx.post(server.url + "/v1/completions", json=bad, timeout=30)
        assert response.status_code == 400 and response.json()["error"]["param"] == param
