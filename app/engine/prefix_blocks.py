"""A token sequence as chained hashes of its 64-token blocks: what routing compares between workers.

Block k's hash covers every token before its end (it is chained through block k-1's),
so two prompts share their first k hashes exactly when they share their first 64·k
tokens, and a worker can publish what its KV cache holds as a set of 8-byte numbers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

BLOCK = 64  # tokens per block: llama.cpp's own KV cells are too fine to publish one by one


def block_hashes(tokens: Sequence[int] | np.ndarray) -> list[int]:
    """The chained hash of every whole block of `tokens` (never 0, which marks an empty entry)."""
    array = np.asarray(tokens, dtype=np.int32)
    hashes: list[int] = []
    chain = b""
    for start in range(0, len(array) - BLOCK + 1, BLOCK):
        chain = hashlib.blake2b(chain + array[start : start + BLOCK].tobytes(), digest_size=8).digest()
        hashes.append(int.from_bytes(chain, "little") | 1)
    return hashes
