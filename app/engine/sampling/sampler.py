"""One sequence's sampler: llama.cpp's own chain, a grammar checked only when it rejects, and logprobs."""

from __future__ import annotations

import ctypes
import logging
import math
from collections.abc import Callable
from typing import Any

import llama_cpp
import numpy as np

from app.engine.sampling import sampler_chain
from app.engine.types import ChoicePlan, TokenLogprob

log = logging.getLogger(__name__)
_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


class SequenceSampler:
    """Samples one sequence's tokens from its own row of the batch's logits.

    The chain is llama-server's (sampler_chain.py), with its own random stream so that
    sequences side by side never share one. A grammar stays out of the
    chain: a token sampled without it is checked alone, and only when the grammar
    rejects it is the grammar applied to the whole vocabulary and the token drawn again
    (llama-server's rejection sampling). Running a grammar over 49k candidates every
    token would stall every sequence of the batch.
    """

    def __init__(self, plan: ChoicePlan, ctx: Any, vocab: Any, n_vocab: int, end_tokens: list[int]) -> None:
        """A sampler drawing from `ctx`'s logits over `vocab` (llama.cpp's pointers) of `n_vocab` tokens."""
        self._ctx = ctx
        self._n_vocab = n_vocab
        self._end = end_tokens[0] if end_tokens else llama_cpp.llama_vocab_eos(vocab)
        # ignore_eos and min_tokens ban the end-of-generation tokens by a bias at the head
        # of the chain, as llama-server does; min_tokens lifts the ban after that many.
        self.ends_banned = plan.ignore_eos or plan.min_tokens > 0
        self.chain = sampler_chain.build(plan, n_vocab, vocab, end_tokens if self.ends_banned else [], _bias)
        # A chain that only picks the likeliest token (temperature 0, nothing else but the ban)
        # is one argmax over the row: llama.cpp's draw copies all n_vocab logits first, ten
        # times its cost, for every sequence every step.
        greedy_only = plan.sampling.temperature <= 0 and not plan.grammar
        self._argmax = greedy_only and sampler_chain.length(self.chain) == 1 + self.ends_banned
        self._ends = frozenset(end_tokens)
        self._row = ctypes.c_float * n_vocab  # a row of logits, to view in place
        self.grammar = None
        if plan.grammar:
            self.grammar = _grammar_sampler(vocab, plan.grammar, plan.grammar_triggers)
            if not self.grammar:
                llama_cpp.llama_sampler_free(self.chain)
                raise ValueError("llama.cpp could not build the request's grammar")
            self._candidates = (llama_cpp.llama_token_data * n_vocab)()
            self._view = np.frombuffer(memoryview(self._candidates).cast("B"), dtype=_TOKEN_DATA)
            self._all_ids = np.arange(n_vocab, dtype=np.int32)
            self._array = llama_cpp.llama_token_data_array(self._candidates, n_vocab, -1, False)
            self._single = (llama_cpp.llama_token_data * 1)()
            self._single_array = llama_cpp.llama_token_data_array(self._single, 1, -1, False)

    def sample(self, row: int) -> int:
        """Draw this sequence's next token from row `row`, and record it (penalties, grammar)."""
        if self._argmax:
            token = self._likeliest(row)
            if token >= 0:
                llama_cpp.llama_sampler_accept(self.chain, token)
                return token
        if self.grammar is None:
            return int(llama_cpp.llama_sampler_sample(self.chain, self._ctx, row))  # also accepts
        token = self._draw(row, with_grammar=False)
        if not self._grammar_allows(token):
            token = self._draw(row, with_grammar=True)
            if not self._grammar_allows(token):
                # No token of the vocabulary continues the grammar (a character the model cannot
                # write): llama.cpp would throw accepting one, taking the worker down. The answer
                # ends here instead, as if the model had ended it.
                log.warning("the grammar allows no token of this vocabulary here: the answer ends")
                llama_cpp.llama_sampler_accept(self.chain, self._end)
                return self._end
        llama_cpp.llama_sampler_accept(self.grammar, token)
        llama_cpp.llama_sampler_accept(self.chain, token)
        return token

    def accept(self, token: int) -> None:
        """Record a token written for the sequence (a thinking budget's end tag) as if drawn."""
        if self.grammar is not None:
            llama_cpp.llama_sampler_accept(self.grammar, token)
        llama_cpp.llama_sampler_accept(self.chain, token)

    def _draw(self, row: int, with_grammar: bool) -> int:
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self._ctx, row), shape=(self._n_vocab,))
        self._view["id"] = self._all_ids
        self._view["logit"] = logits
        self._view["p"] = 0.0
        # Afresh each draw: a sampler may have shrunk, sorted or selected from the last one.
        self._array = llama_cpp.llama_token_data_array(self._candidates, self._n_vocab, -1, False)
        if with_grammar:
            llama_cpp.llama_sampler_apply(self.grammar, ctypes.byref(self._array))
        llama_cpp.llama_sampler_apply(self.chain, ctypes.byref(self._array))
        return int(self._candidates[self._array.selected].id)

    def _likeliest(self, row: int) -> int:
        """The greedy draw as llama.cpp makes it (the first of the highest logits, the banned end
        tokens left out); -1 where a logit is NaN, which llama.cpp's comparison treats otherwise."""
        pointer = llama_cpp.llama_get_logits_ith(self._ctx, row)
        logits = np.frombuffer(
            memoryview(self._row.from_address(ctypes.addressof(pointer.contents))), np.float32
        )
        token = int(logits.argmax())
        if self.ends_banned and token in self._ends:
            logits = logits.copy()
            logits[list(self._ends)] = -np.inf
            token = int(logits.argmax())
        return -1 if math.isnan(logits[token]) else token

    def _grammar_allows(self, token: int) -> bool:
        self._single[0] = llama_cpp.llama_token_data(token, 1.0, 0.0)
        self._single_array = llama_cpp.llama_token_data_array(self._single, 1, -1, False)
        llama_cpp.llama_sampler_apply(self.grammar, ctypes.byref(self._single_array))
        return self._single[0].logit != float("-inf")

    def allow_end(self) -> None:
        """Lift the ban on end-of-generation tokens (min_tokens reached)."""
        if self.ends_banned:
            llama_cpp.llama_sampler_free(llama_cpp.llama_sampler_chain_remove(self.chain, 0))
            self.ends_banned = False

    def close(self) -> None:
        """Free the native samplers (the chain owns the samplers added to it)."""
        llama_cpp.llama_sampler_free(self.chain)
        if self.grammar is not None:
            llama_cpp.llama_sampler_free(self.grammar)
        self.chain = self.grammar = None


def _bias(n_vocab: int, biases: dict[int, float]) -> Any:
    entries = (llama_cpp.llama_logit_bias * len(biases))(
        *(llama_cpp.llama_logit_bias(token, bias) for token, bias in biases.items())
    )
    return llama_cpp.llama_sampler_init_logit_bias(n_vocab, len(biases), entries)


def logprob_at(
    ctx: Any, row: int, n_vocab: int, token: int, top: int, piece: Callable[[int], bytes]
) -> TokenLogprob:
    """The log-probability of `token` in row `row` and the `top` most likely alternatives.

    Read before the next decode overwrites the row: the raw model distribution,
    before penalties, bias or temperature (as llama-server reports by default).
    """
    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, row), shape=(n_vocab,))
    peak = float(logits.max())
    log_total = peak + float(np.log(np.exp(logits - peak).sum()))
    alternatives: tuple[tuple[int, bytes, float], ...] = ()
    if top:
        best = np.argpartition(-logits, top)[:top]
        best = best[np.argsort(-logits[best])]
        alternatives = tuple((int(t), piece(int(t)), float(logits[t]) - log_total) for t in best)
    return TokenLogprob(token, piece(token), float(logits[token]) - log_total, alternatives)


def _grammar_sampler(vocab: Any, gbnf: str, triggers: tuple[str, ...]) -> Any:
    """llama.cpp's grammar sampler; lazy (waking when a trigger pattern matches) when given triggers."""
    if not triggers:
        return llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode(), b"root")
    patterns = (ctypes.c_char_p * len(triggers))(*(t.encode() for t in triggers))
    no_tokens = (llama_cpp.llama_token * 0)()
    return llama_cpp.llama_sampler_init_grammar_lazy_patterns(
        vocab, gbnf.encode(), b"root", patterns, len(triggers), no_tokens, 0
    )
