"""llama-server's sampling fields on the real model: each sampler does as its definition says; seeds hold."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from harness.servers import Server

REPEATING = "1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3,"
OPEN = "The old lighthouse keeper opened the door and"


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    instance = Server().wait_ready()
    yield instance
    log = instance.output()
    instance.stop(wait=False)
    assert "Traceback" not in log, log


def complete(server: Server, prompt: str, **body: Any) -> str:
    answer = httpx.post(
        server.url + "/v1/completions", json={"prompt": prompt, "max_tokens": 16, **body}, timeout=60
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["choices"][0]["text"])


def first_token(server: Server, prompt: str, **body: Any) -> str:
    answer = httpx.post(
        server.url + "/v1/completions",
        json={"prompt": prompt, "max_tokens": 1, "logprobs": 5, **body},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["choices"][0]["logprobs"]["tokens"][0])


def test_dry_stops_a_forced_repetition(server: Server) -> None:
    plain = complete(server, REPEATING, temperature=0, max_tokens=24)
    assert "1, 2, 3, 1, 2, 3" in plain  # the model keeps the cycle going
    dry = complete(server, REPEATING, temperature=0, max_tokens=24, dry_multiplier=2.0, dry_allowed_length=2)
    assert "1, 2, 3, 1" not in dry, dry  # extending the repeated sequence is penalized
    off = complete(server, REPEATING, temperature=0, max_tokens=24, dry_multiplier=2.0, dry_penalty_last_n=0)
    assert off == plain


def test_xtc_removes_the_top_choices(server: Server) -> None:
    greedy = first_token(server, OPEN, temperature=0)
    # XTC first, then top-k 1: of the tokens above the threshold only the least likely survives XTC.
    order = {"samplers": ["xtc", "top_k", "temperature"], "top_k": 1, "temperature": 1.0, "seed": 3}
    assert first_token(server, OPEN, **order) == greedy  # top-k 1 alone: the top choice
    cut = first_token(server, OPEN, **order, xtc_probability=1.0, xtc_threshold=0.01)
    assert cut != greedy


def test_top_n_sigma_keeps_only_the_top_at_any_temperature(server: Server) -> None:
    greedy = complete(server, OPEN, temperature=0)
    hot = {"temperature": 1.8, "seed": 11, "top_k": 0, "top_p": 1.0, "min_p": 0.0}
    assert complete(server, OPEN, **hot) != greedy
    assert complete(server, OPEN, **hot, top_n_sigma=0.001) == greedy


def test_mirostat_with_a_low_target_surprise_stays_on_the_likeliest_path(server: Server) -> None:
    greedy = complete(server, OPEN, temperature=0)
    hot = {"temperature": 1.5, "seed": 5}
    assert complete(server, OPEN, **hot) != greedy
    assert complete(server, OPEN, **hot, mirostat=2, mirostat_tau=0.05, mirostat_eta=0.1) == greedy
    high = complete(server, OPEN, **hot, mirostat=1, mirostat_tau=8.0)
    assert high == complete(server, OPEN, **hot, mirostat=1, mirostat_tau=8.0)  # seeded


def test_repeat_last_n_zero_turns_the_penalty_off(server: Server) -> None:
    plain = complete(server, REPEATING, temperature=0)
    penalized = complete(server, REPEATING, temperature=0, repeat_penalty=1.5)
    assert penalized != plain
    assert complete(server, REPEATING, temperature=0, repeat_penalty=1.5, repeat_last_n=0) == plain


@pytest.mark.parametrize(
    "fields",
    [{"typical_p": 0.2}, {"dynatemp_range": 1.0, "dynatemp_exponent": 2.0}, {"min_keep": 5, "top_p": 0.1}],
)
def test_each_sampler_changes_a_seeded_answer_and_keeps_it_reproducible(
    server: Server, fields: dict[str, Any]
) -> None:
    seeded = {"temperature": 1.0, "seed": 21, "max_tokens": 24}
    with_it = complete(server, OPEN, **seeded, **fields)
    assert with_it == complete(server, OPEN, **seeded, **fields)
    assert with_it != complete(server, OPEN, **seeded)


def test_every_sampler_at_once_is_reproducible_by_seed(server: Server) -> None:
    everything = {
        "temperature": 0.9, "seed": 42, "typical_p": 0.95, "top_n_sigma": 2.0, "xtc_probability": 0.3,
        "xtc_threshold": 0.1, "dynatemp_range": 0.3, "dry_multiplier": 0.8,
        "dry_sequence_breakers": ["\n"], "repeat_penalty": 1.1, "repeat_last_n": 32, "min_keep": 2,
        "penalize_nl": True, "max_tokens": 32,
        "samplers": ["penalties", "dry", "top_k", "typ_p", "top_p", "min_p", "xtc", "top_n_sigma", "temp"],
    }  # fmt: skip
    first = complete(server, OPEN, **everything)
    assert first and complete(server, OPEN, **everything) == first
    chat = httpx.post(server.url + "/v1/chat/completions", timeout=60,
                      json={"messages": [{"role": "user", "content": OPEN}], **everything})  # fmt: skip
    assert chat.status_code == 200, chat.text


def test_a_bad_sampling_field_is_a_400_naming_it(server: Server) -> None:
    answer = httpx.post(
        server.url + "/v1/completions", json={"prompt": "x", "samplers": ["beam"]}, timeout=60
    )
    assert answer.status_code == 400 and answer.json()["error"]["param"].startswith("samplers")
    answer = httpx.post(server.url + "/v1/completions", json={"prompt": "x", "mirostat": 3}, timeout=60)
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "mirostat"
