"""A small LoRA adapter for a GGUF model, random low-rank weights, written with llama.cpp's gguf package.

No LoRA for SmolLM2 ships on PyPI. llama.cpp reads an adapter as a GGUF whose
`general.type` is `adapter` (`adapter.type` lora, `adapter.lora.alpha`), holding, for a
base weight W of n_in x n_out, `<W>.lora_a` (n_in x rank) and `<W>.lora_b` (rank x
n_out): the layer then computes W x + scale * alpha / rank * B A x. Random A and B on
the attention and feed-forward weights of every layer change the model's output
clearly at scale 1, and not at all at scale 0.

`cached` keeps adapters once per machine in ~/.cache/llm-server/loras (writing one for
Gemma 3 takes about 20 s of numpy): named by the base file, its size, the seed and VERSION.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGUFReader, GGUFWriter

from harness.files import machine_cache, made_once

TARGETS = ("attn_q.weight", "attn_v.weight", "ffn_down.weight")
VERSION = 1  # a change to how adapters are written makes new cached files
CACHE = machine_cache("loras")


def cached(base: str, seed: int = 0) -> Path:
    """The adapter `write` makes for `base` with `seed`, made once per machine (atomically)."""
    source = Path(base)
    target = CACHE / f"{source.stem}-{source.stat().st_size}-seed{seed}-v{VERSION}.gguf"
    return made_once(target, lambda partial: write(partial, base, seed=seed))


def write(path: Path, base: str, rank: int = 4, strength: float = 0.5, seed: int = 0) -> Path:
    """Write an adapter for the GGUF model `base` to `path` and return the path."""
    reader = GGUFReader(base)
    field = reader.fields["general.architecture"]
    arch = bytes(field.parts[field.data[0]]).decode()
    rng = np.random.default_rng(seed)
    writer = GGUFWriter(str(path), arch)
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(rank))  # alpha / rank = 1: the scale is the request's
    for tensor in reader.tensors:
        if not tensor.name.endswith(TARGETS):
            continue
        n_in, n_out = (int(size) for size in tensor.shape[:2])  # ggml's order: ne0 (inputs), ne1
        # numpy's order is ggml's reversed: A is (rank, n_in), B is (n_out, rank).
        a = rng.standard_normal((rank, n_in)) / np.sqrt(n_in)
        b = rng.standard_normal((n_out, rank)) * strength / np.sqrt(rank)
        writer.add_tensor(f"{tensor.name}.lora_a", a.astype(np.float32))
        writer.add_tensor(f"{tensor.name}.lora_b", b.astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
