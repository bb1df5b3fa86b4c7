"""KV cache types on the real llama.cpp: the memory we report is llama.cpp's own, and each type serves."""

from __future__ import annotations

from collections.abc import Callable

import llama_cpp
import numpy as np
import pytest

from app.engine.batch import TokenBatch
from app.engine.context import ContextShape
from app.engine.model import LoadedModel
from app.settings.values import default_model_path
from harness.servers import Server
from tests.support.clients import openai_client


def state_bytes(model: LoadedModel, tokens: int) -> int:
    """What llama.cpp saves of sequence 0 holding `tokens` prompt tokens (its KV cells and a header)."""
    model.clear()
    ids = (llama_cpp.llama_token * tokens)(*([model.tokenizer.tokenize("a", False, False)[0]] * tokens))
    assert llama_cpp.llama_decode(model.ctx, llama_cpp.llama_batch_get_one(ids, tokens)) == 0
    return int(llama_cpp.llama_state_seq_get_size(model.ctx, 0))


@pytest.mark.parametrize(("type_k", "type_v"), [("f16", "f16"), ("q8_0", "q8_0"), ("q4_0", "q8_0")])
def test_the_reported_cell_size_is_what_llama_cpp_stores(type_k: str, type_v: str) -> None:
    shape = ContextShape(1, 512, 512, 512, 2, type_k, type_v)
    model = LoadedModel(default_model_path(), shape)
    try:
        per_cell = (state_bytes(model, 96) - state_bytes(model, 32)) // 64
        # A saved cell also carries its position, its count of sequence ids and the one id (4 bytes each).
        assert model.kv_memory.bytes_per_cell == per_cell - 12
        assert model.kv_memory.total_bytes == model.kv_memory.bytes_per_cell * model.kv_cells
    finally:
        model.close()


def test_a_quantized_cache_serves_and_says_so(start_server: Callable[..., Server]) -> None:
    server = start_server(
        LLM_WORKERS="1", LLM_CACHE_TYPE_K="q8_0", LLM_CACHE_TYPE_V="q8_0", LLM_BATCH_INVARIANT="0"
    )
    with openai_client(server) as client:
        answer = client.chat.completions.create(
            model="SmolLM2-135M-Instruct.Q4_1",
            messages=[{"role": "user", "content": "Name three colours."}],
            max_tokens=24,
            temperature=0,
        )
    assert answer.choices[0].message.content and answer.usage and answer.usage.completion_tokens > 0
    # Another quantization (and so other arithmetic) is another system_fingerprint.
    assert answer.system_fingerprint and answer.system_fingerprint.startswith("fp_")
    assert "KV cells of q8_0/q8_0" in server.output()


def test_a_state_kept_in_host_memory_comes_back_as_llama_cpp_computed_it() -> None:
    model = LoadedModel(default_model_path(), ContextShape(2, 512, 1024, 512, 2))
    try:
        prompt = model.tokenizer.tokenize("The river ran past the mill, " * 12, True, False)

        def evaluate() -> bytes:
            model.clear()
            batch = TokenBatch(512)
            batch.add_run(np.asarray(prompt, dtype=np.int32), 0, 0, logits_last=True)
            assert model.decode(batch) == 0
            return model.save_state(0)

        kept, recomputed = evaluate(), evaluate()
        assert kept == recomputed  # llama.cpp evaluates the same prompt to the same cells
        model.clear()
        model.load_state(0, kept)
        assert model.save_state(0) == kept

        def next_logits() -> np.ndarray:
            batch = TokenBatch(8)
            batch.add(prompt[-1], len(prompt), 0, True)
            assert model.decode(batch) == 0
            row = llama_cpp.llama_get_logits_ith(model.ctx, 0)
            return np.ctypeslib.as_array(row, shape=(model.n_vocab,)).copy()

        restored = next_logits()
        evaluate()
        assert np.array_equal(restored, next_logits())
    finally:
        model.close()


def test_a_conversation_pushed_out_of_its_sequence_is_restored_and_answers_as_recomputed(
    start_server: Callable[..., Server],
) -> None:
    history = [{"role": "user", "content": "Describe a lighthouse in the fog, in detail. " * 8}]
    other = [{"role": "user", "content": "Name three birds."}]
    answers = {}
    for ram in ("64", "0"):
        server = start_server(LLM_WORKERS="1", LLM_PARALLEL="1", LLM_CACHE_RAM_MB=ram)
        with openai_client(server) as client:
            ask = dict(model="SmolLM2-135M-Instruct.Q4_1", max_tokens=16, temperature=0)
            first = client.chat.completions.create(messages=history, **ask)
            client.chat.completions.create(messages=other, **ask)  # takes the only sequence
            turn = [*history, {"role": "assistant", "content": first.choices[0].message.content},
                    {"role": "user", "content": "And at night?"}]  # fmt: skip
            again = client.chat.completions.create(messages=turn, **ask)
        assert again.usage and again.usage.prompt_tokens_details
        answers[ram] = (again.choices[0].message.content, again.usage.prompt_tokens_details.cached_tokens)
    # Restored from memory, or evaluated again but for the template's default system prompt.
    assert answers["64"][1] >= 64 + answers["0"][1] and answers["0"][1] < 64
    assert answers["64"][0] == answers["0"][0]
