"""KV cache types: every setting's name maps to a ggml type, and a cell's bytes follow the heads."""

from __future__ import annotations

import llama_cpp

from app.engine.cache.kv_memory import bytes_per_cell, ggml_type, row_bytes
from app.settings.model_entries import KV_TYPES


def test_every_type_the_settings_accept_is_a_ggml_type() -> None:
    known = {name: getattr(llama_cpp, f"GGML_TYPE_{name.upper()}", None) for name in KV_TYPES}
    known["bf16"] = 30  # ggml.h's GGML_TYPE_BF16, not in the binding's list
    assert {name: ggml_type(name) for name in KV_TYPES} == known


def test_quantized_rows_store_blocks_of_32() -> None:
    assert row_bytes("f16", 64) == 128
    assert row_bytes("q8_0", 64) == 68  # two blocks of 32 values, each 32 bytes plus a 2-byte scale
    assert row_bytes("q4_0", 64) == 36


def test_a_cell_holds_keys_and_values_of_every_layer() -> None:
    smollm2 = {"general.architecture": "llama"}  # 30 layers, 9 heads (3 for KV) over 576 dims
    assert bytes_per_cell(smollm2, 30, 9, 3, 576, "f16", "f16") == 30 * 2 * 192 * 2
    assert bytes_per_cell(smollm2, 30, 9, 3, 576, "q8_0", "f16") == 30 * (204 + 384)
    # A GGUF that states its head sizes (heads not n_embd / n_head) is taken at its word.
    wide = {"general.architecture": "qwen3", "qwen3.attention.key_length": "128"}
    assert bytes_per_cell(wide, 2, 16, 8, 1024, "f16", "f16") == 2 * (8 * 128 * 2 + 8 * 64 * 2)
