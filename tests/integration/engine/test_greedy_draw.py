"""A temperature-0 draw is one argmax over the row: it picks what llama.cpp's own greedy chain picks,
the banned end tokens left out, on the real model's logits, step after step."""

from __future__ import annotations

import ctypes

import llama_cpp
import numpy as np
import pytest

from app.engine.batch import TokenBatch
from app.engine.context import ContextShape
from app.engine.model import LoadedModel
from app.engine.types import ChoicePlan, Sampling
from app.settings.values import default_model_path
from harness import real_models


@pytest.mark.parametrize(
    "path", [default_model_path(), str(real_models.gemma3_path())], ids=["smollm2", "gemma3"]
)
def test_the_argmax_draw_picks_what_llama_cpps_greedy_chain_picks(path: str) -> None:
    model = LoadedModel(path, ContextShape(1, 512, 512, 512, 1))
    try:
        ends = [t for t in range(model.n_vocab) if model.tokenizer.is_end_of_generation(t)]
        prompt = model.tokenizer.text("The three primary colours are")
        plain = model.sampler(ChoicePlan(prompt, 32, Sampling(temperature=0)), ends)
        banned = model.sampler(ChoicePlan(prompt, 32, Sampling(temperature=0), ignore_eos=True), ends)
        biased = model.sampler(ChoicePlan(prompt, 32, Sampling(temperature=0), logit_bias={11: 5.0}), ends)
        assert plain._argmax and banned._argmax and not biased._argmax  # a bias goes through the chain
        batch = TokenBatch(512)
        batch.clear()
        for position, token in enumerate(prompt):
            batch.add(token, position, 0, position == len(prompt) - 1)
        for step in range(24):
            assert model.decode(batch) == 0
            row = batch.size - 1
            pointer = llama_cpp.llama_get_logits_ith(model.ctx, row)
            logits = np.ctypeslib.as_array(pointer, shape=(model.n_vocab,))
            if step % 3 == 2:  # make an end token the likeliest: the banned draw must pass it by
                logits[ends[0]] = float(logits.max()) + 10.0
            expected_plain = reference(model, row, [])
            expected_banned = reference(model, row, ends)
            assert plain.sample(row) == expected_plain
            assert banned.sample(row) == expected_banned
            assert expected_banned not in ends
            if step % 3 == 2:
                assert expected_plain == ends[0] != expected_banned
            batch.clear()
            batch.add(expected_banned, len(prompt) + step, 0, True)
        for sampler in (plain, banned, biased):
            sampler.close()
    finally:
        model.close()


def reference(model: LoadedModel, row: int, banned: list[int]) -> int:
    """llama.cpp's greedy chain, the end tokens banned by a bias as the sampler bans them."""
    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    if banned:
        entries = (llama_cpp.llama_logit_bias * len(banned))(
            *(llama_cpp.llama_logit_bias(t, float("-inf")) for t in banned)
        )
        llama_cpp.llama_sampler_chain_add(
            chain, llama_cpp.llama_sampler_init_logit_bias(model.n_vocab, len(banned), entries)
        )
    llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
    try:
        return int(llama_cpp.llama_sampler_sample(chain, model.ctx, ctypes.c_int32(row)))
    finally:
        llama_cpp.llama_sampler_free(chain)
