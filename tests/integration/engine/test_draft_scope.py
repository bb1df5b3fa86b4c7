"""The draft model's cells are a tenant's, as the target's are: a prompt another cache scope put in a
sequence is never resumed by the draft model, whose catch-up time would tell how much of a prompt
another tenant's began with (LLM_SPEC_TYPE=draft). On the real model, drafting for itself."""

from __future__ import annotations

import llama_cpp
import numpy as np

from app.engine.speculative.draft_model import DraftModel
from app.settings.values import default_model_path

SECRET = "Confidential: the merger closes on March 3 at 41 dollars a share. " * 6


def test_a_history_is_resumed_from_the_draft_cells_of_its_own_scope_only() -> None:
    draft = DraftModel(path=default_model_path(), sequences=1, n_ctx=512, n_threads=1)
    try:
        vocab = draft.model.vocab
        text = SECRET.encode()
        buffer = (llama_cpp.llama_token * 512)()
        count = llama_cpp.llama_tokenize(vocab, text, len(text), buffer, 512, True, False)
        history = np.asarray(buffer[:count], dtype=np.int32)
        assert count > 80

        def evaluated(scope: str) -> int:
            before = draft.evaluated
            draft.draft([(0, history, 2, scope)])
            return draft.evaluated - before

        first = evaluated("alice")
        assert first >= count  # the whole history, then a drafted token
        assert evaluated("alice") <= 3  # her own cells: resumed
        assert evaluated("bob") >= count  # Alice's cells are not Bob's to resume, the same text or not
        assert evaluated("alice") >= count  # and Bob's are not hers
    finally:
        draft.close()
