"""Drafting with a smaller model: it reads each drafting choice's history and writes its next tokens.

The draft model has a context of its own beside the target's, a sequence for each of
the target's, and must share its vocabulary (checked at load). Each step it catches
up with what the choices kept since it last drafted for them (a new choice's whole
prompt at first: one decode for all of them), then writes greedily, one decode per
drafted token for every drafting choice at once. Its cells past what was kept are
dropped when it next catches up.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import llama_cpp
import numpy as np
from llama_cpp import _internals as internals

from app.engine.batch import TokenBatch
from app.engine.scheduling import common_prefix
from app.engine.speculative.history import Drafter


class ModelDrafter(Drafter):
    """A choice that drafts with the draft model: its record; the tokens come from DraftModel."""


@dataclass
class DraftModel:
    """The draft model's weights and context; `cached[i]`: the tokens its sequence i holds, `scopes[i]`
    whose prompt they are (the cache scope of the choice that put them there)."""

    path: str
    sequences: int
    n_ctx: int  # per sequence, as the target's
    n_threads: int
    cached: list[list[int]] = field(default_factory=list)
    scopes: list[str] = field(default_factory=list)
    evaluated: int = 0  # tokens its context has evaluated, drafts and catching up alike

    def __post_init__(self) -> None:
        params = llama_cpp.llama_model_default_params()
        params.use_mmap = True
        self.model = internals.LlamaModel(path_model=self.path, params=params, verbose=False)
        context = llama_cpp.llama_context_default_params()
        context.n_ctx, context.n_batch, context.n_ubatch = self.sequences * self.n_ctx, 512, 512
        context.n_seq_max, context.kv_unified = self.sequences, False
        context.n_threads = context.n_threads_batch = self.n_threads
        context.no_perf = True
        self.context = internals.LlamaContext(model=self.model, params=context, verbose=False)
        self.ctx = self.context.ctx
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        self.n_vocab = self.model.n_vocab()
        self.batch = TokenBatch(512)
        self.cached = [[] for _ in range(self.sequences)]
        self.scopes = ["" for _ in range(self.sequences)]

    def check_vocabulary(self, target: internals.LlamaModel) -> None:
        """Refuse a draft model whose tokens are not the target's (its drafts would be other words)."""
        if self.n_vocab != target.n_vocab():
            raise ValueError(f"the draft model has {self.n_vocab} tokens, the model {target.n_vocab()}")
        for token in range(0, self.n_vocab, max(1, self.n_vocab // 512)):
            if self.model.token_to_piece(token) != target.token_to_piece(token):
                raise ValueError(f"the draft model's token {token} is not the model's")

    def draft(self, wanted: list[tuple[int, np.ndarray, int, str]]) -> dict[int, np.ndarray]:
        """For each (sequence, history, length, cache scope): up to `length` tokens the draft model
        writes after it."""
        rows = self._catch_up([(seq_id, history, scope) for seq_id, history, _, scope in wanted])
        drafts: dict[int, list[int]] = {seq_id: [] for seq_id, _, _, _ in wanted}
        lengths = {seq_id: length for seq_id, _, length, _ in wanted}
        while rows:
            following: dict[int, int] = {}
            for seq_id, row in rows.items():
                logits = np.ctypeslib.as_array(
                    llama_cpp.llama_get_logits_ith(self.ctx, row), shape=(self.n_vocab,)
                )
                drafts[seq_id].append(int(np.argmax(logits)))
                if len(drafts[seq_id]) < lengths[seq_id]:
                    following[seq_id] = drafts[seq_id][-1]
            rows = self._decode_next(following) if following else {}
        return {seq_id: np.asarray(tokens, dtype=np.int32) for seq_id, tokens in drafts.items()}

    def release(self, seq_id: int) -> None:
        """The target sequence took another choice: its draft cells are of no more use."""
        llama_cpp.llama_memory_seq_rm(self.memory, seq_id, 0, -1)
        self.cached[seq_id] = []

    def close(self) -> None:
        self.context.close()
        self.model.close()

    def _catch_up(self, histories: list[tuple[int, np.ndarray, str]]) -> dict[int, int]:
        """Evaluate what each history adds to its sequence's draft cells; the row of its last token.

        All but the last new token go first, in as many decodes as they need; the last tokens
        go together in one decode, so every sequence's row is read from the same logits. Cells of
        another cache scope's prompt are never reused: how long the catch-up took would tell a
        tenant how much of its prompt another's began with (as the target's cells never are).
        """
        heads, tails = [], {}
        for seq_id, history, scope in sorted(histories, key=lambda item: item[0]):
            tokens = history.tolist()
            shared = common_prefix(self.cached[seq_id], tokens) if self.scopes[seq_id] == scope else 0
            reused = min(shared, len(tokens) - 1)  # a row to draft from
            self.scopes[seq_id] = scope
            if not llama_cpp.llama_memory_seq_rm(self.memory, seq_id, reused, -1):
                # A draft model whose memory cannot be cut back (recurrent): catch up from the start.
                llama_cpp.llama_memory_seq_rm(self.memory, seq_id, 0, -1)
                reused = 0
            self.cached[seq_id] = tokens[:-1]
            heads.append((seq_id, reused, history[reused:-1]))
            tails[seq_id] = tokens[-1]
        while any(len(tokens) for _, _, tokens in heads):
            self.batch.clear()
            left = []
            for seq_id, first, tokens in heads:
                take = tokens[: self.batch.room]
                if len(take):
                    self.batch.add_run(take, first, seq_id, logits_last=False)
                left.append((seq_id, first + len(take), tokens[len(take) :]))
            self._decode()
            heads = left
        return self._decode_next(tails)

    def _decode_next(self, following: dict[int, int]) -> dict[int, int]:
        """One drafted token more for each sequence; the row of each."""
        self.batch.clear()
        rows = {}
        for seq_id in sorted(following):
            rows[seq_id] = self.batch.add(following[seq_id], len(self.cached[seq_id]), seq_id, True)
            self.cached[seq_id].append(following[seq_id])
        self._decode()
        return rows

    def _decode(self) -> None:
        self.evaluated += self.batch.size
        code = self.batch.decode(self.ctx)
        if code != 0:
            raise RuntimeError(f"the draft model's llama_decode failed with {code}")
