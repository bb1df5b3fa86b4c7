"""A token sequence as chained hashes of its 64-token blocks: what routing compares between workers.

Block k's hash covers every token before its end (it is chained through block k-1's),
so two prompts share their first k hashes exactly when they share their first 64·k
tokens, and a worker can publish what its KV cache holds as a set of 8-byte numbers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from app.engine.memory import Resumable

BLOCK = 64  # tokens per block: llama.cpp's own KV cells are too fine to publish one by one


def block_hashes(tokens: Sequence[int] | np.ndarray, scope: str = "") -> list[int]:
    """The chained hash of every whole block of `tokens` (never 0, which marks an empty entry).

    The chain begins from the cache `scope` (a tenant's), so that the same tokens held for two
    tenants publish different hashes, and routing never counts one tenant's cache for another.
    """
    array = np.asarray(tokens, dtype=np.int32)
    hashes: list[int] = []
    chain = scope.encode()
    for start in range(0, len(array) - BLOCK + 1, BLOCK):
        chain = hashlib.blake2b(chain + array[start : start + BLOCK].tobytes(), digest_size=8).digest()
        hashes.append(int.from_bytes(chain, "little") | 1)
    return hashes


def resumable_only(hashes: Sequence[int], resumable: Resumable) -> list[int]:
    """`hashes` with 0 (an empty entry) for each block routing must not count as held.

    A block is published when a prompt sharing everything up to its end resumes past its
    start: routing then counts at most one block more than is really reused. On a memory
    that cannot be cut back (a sliding window, a recurrent state), that leaves the blocks
    around its checkpoints and those its live cells resume.
    """
    return [h if resumable.best((k + 1) * BLOCK) > k * BLOCK else 0 for k, h in enumerate(hashes)]
