"""A tiny BERT embedding model as a GGUF file, random weights, for tests of the encoder-only path.

No small embedding GGUF ships on PyPI; real embedding models (bge, all-MiniLM, nomic-embed)
are BERT-like: no causal mask, no KV cache, a pooling type in their metadata. This one
has the same structure at a few kilobytes, written with llama.cpp's own gguf package.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGUFWriter, PoolingType, TokenType

WORDS = "the cat dog sat on mat quick brown fox jumps over lazy river bank hello world".split()
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
EMBD, FF, LAYERS, HEADS, CONTEXT = 32, 64, 2, 2, 128


def write(path: Path, pooling: PoolingType = PoolingType.CLS, seed: int = 0) -> Path:
    """Write the model to `path` (its pooling type in the metadata) and return the path.

    With PoolingType.RANK it is a reranker: a classification head (`cls`, then `cls.output`
    to one score) on the [CLS] state, as BERT cross-encoders such as bge-reranker have.
    """
    # As llama.cpp's converter writes BERT's vocabulary: a word-start piece has the "▁" prefix,
    # a continuation ("##s" in BERT's files) has none.
    letters = "abcdefghijklmnopqrstuvwxyz"
    tokens = SPECIAL + [f"\u2581{word}" for word in WORDS] + [f"\u2581{c}" for c in letters] + list(letters)
    rng = np.random.default_rng(seed)
    writer = GGUFWriter(str(path), "bert")
    writer.add_name("tiny-bert")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(EMBD)
    writer.add_feed_forward_length(FF)
    writer.add_block_count(LAYERS)
    writer.add_head_count(HEADS)
    writer.add_layer_norm_eps(1e-12)
    writer.add_causal_attention(False)
    writer.add_pooling_type(pooling)
    writer.add_file_type(0)  # all F32
    writer.add_tokenizer_model("bert")
    writer.add_token_list(tokens)
    normal = len(tokens) - len(SPECIAL)
    writer.add_token_types([TokenType.CONTROL] * len(SPECIAL) + [TokenType.NORMAL] * normal)
    writer.add_token_type_count(2)
    writer.add_unk_token_id(1)
    writer.add_pad_token_id(0)
    writer.add_bos_token_id(2)  # [CLS] starts every input
    writer.add_sep_token_id(3)  # [SEP] ends every input
    writer.add_mask_token_id(4)
    writer.add_add_bos_token(True)
    writer.add_add_sep_token(True)

    def tensor(name: str, *shape: int, scale: float = 0.2) -> None:
        writer.add_tensor(name, (rng.standard_normal(shape) * scale).astype(np.float32))

    def norm(name: str) -> None:
        writer.add_tensor(f"{name}.weight", np.ones(EMBD, dtype=np.float32))
        writer.add_tensor(f"{name}.bias", np.zeros(EMBD, dtype=np.float32))

    # numpy shapes are GGML's reversed: (rows, columns) = (output, input).
    tensor("token_embd.weight", len(tokens), EMBD)
    tensor("token_types.weight", 2, EMBD)
    tensor("position_embd.weight", CONTEXT, EMBD)
    norm("token_embd_norm")
    for layer in range(LAYERS):
        block = f"blk.{layer}"
        for part in ("attn_q", "attn_k", "attn_v", "attn_output"):
            tensor(f"{block}.{part}.weight", EMBD, EMBD)
            tensor(f"{block}.{part}.bias", EMBD, scale=0.02)
        norm(f"{block}.attn_output_norm")
        tensor(f"{block}.ffn_up.weight", FF, EMBD)
        tensor(f"{block}.ffn_up.bias", FF, scale=0.02)
        tensor(f"{block}.ffn_down.weight", EMBD, FF)
        tensor(f"{block}.ffn_down.bias", EMBD, scale=0.02)
        norm(f"{block}.layer_output_norm")
    if pooling == PoolingType.RANK:
        tensor("cls.weight", EMBD, EMBD)
        tensor("cls.bias", EMBD, scale=0.02)
        tensor("cls.output.weight", 1, EMBD, scale=1.0)
        tensor("cls.output.bias", 1, scale=0.02)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
