"""KV cache types on the real llama.cpp: the memory we report is llama.cpp's own, and each type serves."""

from __future__ import annotations

from collections.abc import Callable

import llama_cpp
import pytest

from app.engine.context import ContextShape
from app.engine.model import LoadedModel
from app.settings.values import default_model_path
from tests.support.clients import openai_client
from tests.support.servers import Server


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
    server = start_server(LLM_WORKERS="1", LLM_CACHE_TYPE_K="q8_0", LLM_CACHE_TYPE_V="q8_0")
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
