"""What "the same answer" means when an optimisation is on and when it is off.

The answer with the optimisation equals the plain one token for token, or, where the docs
allow it (a window-sized cache's checkpoints; the default mode's fastest kernels), the first
token where they part was a near tie in the plain answer: its two likeliest tokens within NEAR_TIE
of each other, and the optimised answer took the other one. llama.cpp's sums may differ in
their last bits when the same tokens sit in other KV cells (a sliding window's checkpoint
restores its cells packed), and at such a tie that flips a greedy token; a difference with a
clear winner is a bug.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

NEAR_TIE = 0.05  # nats between the plain answer's two likeliest tokens


@dataclass(frozen=True)
class Answer:
    """A completion's text, its tokens, and the two likeliest tokens (with log-probabilities) at each."""

    text: str
    tokens: tuple[str, ...]
    top: tuple[dict[str, float], ...]
    cached: int = 0  # prompt tokens its server resumed from cache
    prompt_tokens: int = 0

    @classmethod
    def of(cls, choice: dict[str, Any], usage: dict[str, Any]) -> Answer:
        logprobs = choice["logprobs"]
        details = usage.get("prompt_tokens_details") or {}
        return cls(
            choice["text"],
            tuple(logprobs["tokens"]),
            tuple(logprobs["top_logprobs"]),
            details.get("cached_tokens", 0),
            usage["prompt_tokens"],
        )


def complete(url: str, prompt: str | list[int], max_tokens: int | None, **fields: Any) -> list[Answer]:
    """A text completion's choices, with the two likeliest tokens at each step (POST /v1/completions);
    `max_tokens` None: the rest of the context."""
    body = {"prompt": prompt, "temperature": 0, "logprobs": 2, **fields}
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    answer = httpx.post(url + "/v1/completions", json=body, timeout=300)
    assert answer.status_code == 200, answer.text
    payload = answer.json()
    choices = sorted(payload["choices"], key=lambda c: c["index"])
    return [Answer.of(choice, payload["usage"]) for choice in choices]


def difference(plain: Answer, other: Answer, near_ties: bool = True) -> str | None:
    """None if `other` is `plain`, or (with `near_ties`) parts from it only at a near tie; else what
    is wrong."""
    for position, (mine, theirs) in enumerate(zip(plain.tokens, other.tokens, strict=False)):
        if mine == theirs:
            continue
        top = plain.top[position]
        ranked = sorted(top.values(), reverse=True)
        gap = ranked[0] - ranked[1] if len(ranked) > 1 else float("inf")
        if near_ties and theirs in top and gap < NEAR_TIE:
            return None
        return f"token {position}: {theirs!r} for {mine!r} where the plain answer's top two were {top}"
    if len(plain.tokens) != len(other.tokens):
        return f"{len(other.tokens)} tokens for {len(plain.tokens)}: {other.text!r} for {plain.text!r}"
    return None


def text_difference(plain: Answer, text: str) -> str | None:
    """As `difference`, against another server's answer known only as text: None if it is `plain`'s
    text, or parts from it at a token where the plain answer's two likeliest were a near tie."""
    said = ""
    for position, token in enumerate(plain.tokens):
        if not text.startswith(said + token):
            ranked = sorted(plain.top[position].values(), reverse=True)
            gap = ranked[0] - ranked[1] if len(ranked) > 1 else float("inf")
            return None if gap < NEAR_TIE else f"token {position}: {text[len(said) :]!r} for {token!r}"
        said += token
    return None if text == said else f"{text!r} for {said!r}"


def tokens_of(url: str, text: str, first: bool) -> list[int]:
    """`text` as the server's token ids (POST /tokenize), with the BOS a prompt starts with if `first`."""
    answer = httpx.post(url + "/tokenize", json={"content": text, "add_special": first}, timeout=60)
    assert answer.status_code == 200, answer.text
    return [int(t) for t in answer.json()["tokens"]]


def complete_ids(url: str, prompt: list[int], max_tokens: int) -> tuple[Answer, list[int]]:
    """A greedy completion of token ids through llama-server's POST /completion: the answer and the
    ids it generated, so that a next prompt can extend exactly what the server's cells hold (text
    need not tokenize back to the same ids, least of all a random-weight model's)."""
    body = {"prompt": prompt, "n_predict": max_tokens, "temperature": 0, "n_probs": 2, "return_tokens": True}
    answer = httpx.post(url + "/completion", json=body, timeout=300)
    assert answer.status_code == 200, answer.text
    payload = answer.json()
    steps = payload["completion_probabilities"]
    tokens = tuple(step["token"] for step in steps)
    top = tuple({t["token"]: t["logprob"] for t in step["top_logprobs"]} for step in steps)
    result = Answer(payload["content"], tokens, top, payload["tokens_cached"], payload["tokens_evaluated"])
    return result, [int(t) for t in payload["tokens"]]
