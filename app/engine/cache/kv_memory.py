"""The KV cache's cell types and what they cost: the ggml type of each setting, and bytes per cell."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# setting -> (ggml type id, values per block, bytes per block), as ggml.c's type traits.
_TYPES = {
    "f32": (0, 1, 4),
    "f16": (1, 1, 2),
    "bf16": (30, 1, 2),
    "q4_0": (2, 32, 18),
    "q4_1": (3, 32, 20),
    "q5_0": (6, 32, 22),
    "q5_1": (7, 32, 24),
    "q8_0": (8, 32, 34),
    "iq4_nl": (20, 32, 18),
}


def ggml_type(name: str) -> int:
    """The ggml type id llama.cpp's context parameters take for a cache type's name."""
    return _TYPES[name][0]


def row_bytes(name: str, values: int) -> int:
    """Bytes of `values` numbers stored as `name` (ggml_row_size)."""
    _, block, size = _TYPES[name]
    return values // block * size


@dataclass(frozen=True)
class KvMemory:
    """How much memory the context's KV cache takes: cells, their types, bytes per cell and in all."""

    cells: int
    type_k: str
    type_v: str
    bytes_per_cell: int

    @property
    def total_bytes(self) -> int:
        return self.cells * self.bytes_per_cell


def bytes_per_cell(metadata: Mapping[str, str], n_layer: int, n_head: int, n_head_kv: int, n_embd: int,
                   type_k: str, type_v: str) -> int:  # fmt: skip
    """One cell's keys and values over every layer, from the GGUF's attention shape.

    Head sizes come from `<arch>.attention.key_length` / `value_length` when the GGUF
    gives them (models whose heads are not n_embd / n_head), as llama.cpp reads them.
    """
    arch = metadata.get("general.architecture", "")
    head = n_embd // max(1, n_head)
    key = int(metadata.get(f"{arch}.attention.key_length", head))
    value = int(metadata.get(f"{arch}.attention.value_length", head))
    return n_layer * (row_bytes(type_k, n_head_kv * key) + row_bytes(type_v, n_head_kv * value))
