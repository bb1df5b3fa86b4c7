"""A request's sampler chain, built as llama-server builds it, from llama.cpp's own samplers.

The order is llama-server's: logit bias, then (unless Mirostat replaces them all) the
samplers in `samplers` order (default: penalties, DRY, top-n-sigma, top-k, typical,
top-p, min-p, XTC, temperature; infill where it is named), then a seeded draw. A
sampler left at its "off" value is not added at all: each one added costs a pass over
the candidates, every token.
At temperature 0 the draw is greedy, after the penalties, DRY and bias only, so that
a temperature-0 answer is the same whatever else the request says.
"""

from __future__ import annotations

import ctypes
import random
from collections.abc import Callable
from typing import Any

import llama_cpp

from app.engine.types import SAMPLER_NAMES as NAMES
from app.engine.types import ChoicePlan, Sampling

DEFAULT_ORDER = (
    "penalties",
    "dry",
    "top_n_sigma",
    "top_k",
    "typical_p",
    "top_p",
    "min_p",
    "xtc",
    "temperature",
)
BEFORE_GREEDY = ("penalties", "dry")  # what still applies at temperature 0


def build(plan: ChoicePlan, n_vocab: int, vocab: Any, banned: list[int], bias: Callable[..., Any]) -> Any:
    """The chain for `plan` (its owner frees it); `banned` end tokens first, then `plan`'s bias."""
    sampling = plan.sampling
    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    if banned:
        _add(chain, bias(n_vocab, dict.fromkeys(banned, float("-inf"))))  # first, so allow_end can remove it
    if plan.logit_bias:
        _add(chain, bias(n_vocab, plan.logit_bias))
    seed = (sampling.seed if sampling.seed is not None else random.getrandbits(32)) & 0xFFFFFFFF
    order = [NAMES[name] for name in sampling.samplers] if sampling.samplers is not None else DEFAULT_ORDER
    greedy = sampling.temperature <= 0
    if sampling.mirostat and not greedy:
        order = []  # as llama-server: Mirostat takes the place of the whole chain but the bias
    # At temperature 0 the infill sampler still decides (it adds up the chances of tokens that
    # begin alike, among the candidates the samplers before it left): it and those stay.
    shaping = set(order[: order.index("infill") + 1]) if greedy and "infill" in order else set()
    for name in order:
        if greedy and name not in BEFORE_GREEDY and name not in shaping:
            continue
        sampler = _sampler(name, plan, n_vocab, vocab, seed)
        if sampler is not None:
            _add(chain, sampler)
    if greedy:
        _add(chain, llama_cpp.llama_sampler_init_greedy())
    elif sampling.mirostat == 1:
        _add(chain, llama_cpp.llama_sampler_init_temp(sampling.temperature))
        _add(
            chain,
            llama_cpp.llama_sampler_init_mirostat(
                n_vocab, seed, sampling.mirostat_tau, sampling.mirostat_eta, 100
            ),
        )
    elif sampling.mirostat == 2:
        _add(chain, llama_cpp.llama_sampler_init_temp(sampling.temperature))
        _add(
            chain,
            llama_cpp.llama_sampler_init_mirostat_v2(seed, sampling.mirostat_tau, sampling.mirostat_eta),
        )
    else:
        _add(chain, llama_cpp.llama_sampler_init_dist(seed))
    return chain


def length(chain: Any) -> int:
    """How many samplers `chain` holds."""
    return int(llama_cpp.llama_sampler_chain_n(chain))


def _add(chain: Any, sampler: Any) -> None:
    llama_cpp.llama_sampler_chain_add(chain, sampler)


def _window(last_n: int, plan: ChoicePlan) -> int:
    """A window of tokens: -1 is the whole of this sequence's context (its prompt and its answer)."""
    return len(plan.prompt_tokens) + plan.max_tokens if last_n < 0 else last_n


def _primed(sampler: Any, plan: ChoicePlan, last_n: int) -> Any:
    """`sampler` having seen the prompt's last `last_n` tokens: a repetition of the prompt counts too."""
    for token in plan.prompt_tokens[-last_n:] if last_n else ():
        llama_cpp.llama_sampler_accept(sampler, token)
    return sampler


def _sampler(name: str, plan: ChoicePlan, n_vocab: int, vocab: Any, seed: int) -> Any:
    """One sampler of the chain, or None when its settings leave it off."""
    s: Sampling = plan.sampling
    if name == "penalties":
        window = _window(s.repeat_last_n, plan)
        if not window or (
            s.repeat_penalty == 1.0 and s.presence_penalty == 0.0 and s.frequency_penalty == 0.0
        ):
            return None
        sampler = llama_cpp.llama_sampler_init_penalties(
            n_vocab, window, s.repeat_penalty, s.frequency_penalty, s.presence_penalty
        )
        return _primed(sampler, plan, window)
    if name == "dry":
        window = _window(s.dry_penalty_last_n, plan)
        if s.dry_multiplier <= 0 or not window:
            return None
        breakers = [text.encode() for text in s.dry_sequence_breakers]
        array = (ctypes.c_char_p * len(breakers))(*breakers)
        sampler = llama_cpp.llama_sampler_init_dry(
            vocab, s.dry_multiplier, s.dry_base, s.dry_allowed_length, window, array, len(breakers)
        )
        return _primed(sampler, plan, window)
    if name == "infill":  # fill-in-the-middle: the chances of tokens with a common prefix, added up
        return llama_cpp.llama_sampler_init_infill(vocab)
    if name == "temperature":
        if s.dynatemp_range > 0:
            return llama_cpp.llama_sampler_init_temp_ext(s.temperature, s.dynatemp_range, s.dynatemp_exponent)
        return llama_cpp.llama_sampler_init_temp(s.temperature)
    keep = max(s.min_keep, 1)
    off = {
        "top_n_sigma": s.top_n_sigma <= 0, "top_k": s.top_k <= 0, "typical_p": s.typical_p >= 1.0,
        "top_p": s.top_p >= 1.0, "min_p": s.min_p <= 0.0, "xtc": s.xtc_probability <= 0.0,
    }  # fmt: skip
    if off[name]:
        return None
    made: dict[str, Callable[[], Any]] = {
        "top_n_sigma": lambda: llama_cpp.llama_sampler_init_top_n_sigma(s.top_n_sigma),
        "top_k": lambda: llama_cpp.llama_sampler_init_top_k(s.top_k),
        "typical_p": lambda: llama_cpp.llama_sampler_init_typical(s.typical_p, keep),
        "top_p": lambda: llama_cpp.llama_sampler_init_top_p(s.top_p, keep),
        "min_p": lambda: llama_cpp.llama_sampler_init_min_p(s.min_p, keep),
        "xtc": lambda: llama_cpp.llama_sampler_init_xtc(s.xtc_probability, s.xtc_threshold, keep, seed),
    }
    return made[name]()
