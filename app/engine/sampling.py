"""llama.cpp's sampler chain with what requests need (logit bias, grammars), and log-probabilities."""

from __future__ import annotations

import ctypes
from typing import Any

import llama_cpp
import numpy as np
from llama_cpp import _internals as internals

from app.engine.types import TokenLogprob


class ServerLlama(llama_cpp.Llama):
    """A Llama whose sampler chain also applies the current request's logit bias.

    llama-cpp-python's own chain has no native logit bias (only a Python logits
    processor, slow and marked as possibly broken in its source), so this rebuilds
    the same chain with llama.cpp's logit-bias sampler in front.
    """

    logit_bias: dict[int, float] = {}

    def _init_sampler(self, **kwargs: Any) -> internals.LlamaSampler:
        sampler = internals.LlamaSampler()
        if self.logit_bias:
            sampler.add_logit_bias(self._n_vocab, self.logit_bias)
        sampler.add_penalties(
            n_vocab=self._n_vocab,
            penalty_last_n=self.last_n_tokens_size,
            penalty_repeat=kwargs["repeat_penalty"],
            penalty_freq=kwargs["frequency_penalty"],
            penalty_present=kwargs["presence_penalty"],
        )
        if kwargs.get("grammar") is not None:
            sampler.add_grammar(self._model, kwargs["grammar"])
        if kwargs["temp"] <= 0:
            sampler.add_greedy()
        else:
            sampler.add_top_k(kwargs["top_k"])
            sampler.add_top_p(kwargs["top_p"], 1)
            sampler.add_min_p(kwargs["min_p"], 1)
            sampler.add_temp(kwargs["temp"])
            sampler.add_dist(self._seed)
        return sampler


def logprob_of(llama: Any, token: int, top: int) -> TokenLogprob:
    """The log-probability of `token` under the distribution just decoded, and the top alternatives.

    Read from the logits of the last decode, which produced the distribution this
    token was sampled from: the raw model distribution, before penalties or temperature.
    """
    pointer = llama_cpp.llama_get_logits_ith(llama.ctx, -1)
    logits = np.ctypeslib.as_array(
        ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float)), shape=(llama.n_vocab(),)
    )
    peak = float(logits.max())
    log_total = peak + float(np.log(np.exp(logits - peak).sum()))
    alternatives: tuple[tuple[int, bytes, float], ...] = ()
    if top:
        best = np.argpartition(-logits, top)[:top]
        best = best[np.argsort(-logits[best])]
        alternatives = tuple((int(t), piece(llama, int(t)), float(logits[t]) - log_total) for t in best)
    return TokenLogprob(token, piece(llama, token), float(logits[token]) - log_total, alternatives)


def piece(llama: Any, token: int) -> bytes:
    """The bytes one token stands for."""
    return llama.detokenize([token], special=False)
