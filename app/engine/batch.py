"""One step's llama_batch, over numpy arrays so that a prompt chunk is copied in, not looped over."""

from __future__ import annotations

import ctypes

import llama_cpp
import numpy as np


class TokenBatch:
    """Up to `capacity` tokens, each with its position, its one sequence id and whether it wants logits.

    llama.cpp never sees more than `capacity` (its n_batch) tokens: it asserts on more.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.size = 0
        self.tokens = np.zeros(capacity, dtype=np.int32)
        self.positions = np.zeros(capacity, dtype=np.int32)
        self.seq_ids = np.zeros(capacity, dtype=np.int32)
        self.logits = np.zeros(capacity, dtype=np.int8)
        self._one_seq = np.ones(capacity, dtype=np.int32)  # n_seq_id: each token is in one sequence
        # seq_id is an array of pointers, one per token, each to that token's id in `seq_ids`.
        base = self.seq_ids.ctypes.data
        self._seq_pointers = (ctypes.POINTER(ctypes.c_int32) * capacity)(
            *(ctypes.cast(base + 4 * i, ctypes.POINTER(ctypes.c_int32)) for i in range(capacity))
        )
        # Made once over the arrays: each step only sets n_tokens.
        self.native = llama_cpp.llama_batch(
            token=self.tokens.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token)),
            embd=None,
            pos=self.positions.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_pos)),
            n_seq_id=self._one_seq.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
            seq_id=ctypes.cast(self._seq_pointers, ctypes.POINTER(ctypes.POINTER(llama_cpp.llama_seq_id))),
            logits=self.logits.ctypes.data_as(ctypes.POINTER(ctypes.c_int8)),
        )

    @property
    def room(self) -> int:
        """How many more tokens fit."""
        return self.capacity - self.size

    def clear(self) -> None:
        self.size = 0

    def add(self, token: int, position: int, seq: int, logits: bool) -> int:
        """Add one token; returns its index (where its logits will be, if asked for)."""
        index = self.size
        self.tokens[index] = token
        self.positions[index] = position
        self.seq_ids[index] = seq
        self.logits[index] = logits
        self.size = index + 1
        return index

    def add_run(
        self, tokens: np.ndarray, first_position: int, seq: int, logits_last: bool, logits_all: bool = False
    ) -> int:
        """Add consecutive tokens of one sequence; returns the index of the last one."""
        start, end = self.size, self.size + len(tokens)
        self.tokens[start:end] = tokens
        self.positions[start:end] = np.arange(first_position, first_position + len(tokens), dtype=np.int32)
        self.seq_ids[start:end] = seq
        self.logits[start:end] = logits_all
        self.logits[end - 1] = logits_last or logits_all
        self.size = end
        return end - 1

    def decode(self, ctx: llama_cpp.llama_context_p) -> int:
        """Run llama_decode on the tokens added since the last clear(); its return code."""
        self.native.n_tokens = self.size
        return int(llama_cpp.llama_decode(ctx, self.native))
