"""llama-server's --cache-reuse: chunks of a sequence's cache that a new prompt holds at other positions.

A prompt that differs from a sequence's cache in the middle (an editor's request after a
line was deleted above the cursor, or other files' chunks changed) shares a prefix, then
runs of tokens the cache holds further on. With LLM_CACHE_REUSE=N, each run of at least N
tokens is moved back to where the prompt has it (llama_memory_seq_rm, llama_memory_seq_add)
instead of being evaluated again: llama-server's loop (tools/server/server-context.cpp,
`n_cache_reuse`), so the two reuse the same chunks. Moved cells hold keys rotated twice, a
rounding away from a fresh evaluation's: answers may differ at near-ties, as llama-server's
do; that is why it is off by default.
"""

from __future__ import annotations

from app.engine.context import BatchContext
from app.engine.sequence import Sequence


def reuse(model: BatchContext, s: Sequence, prompt: list[int], n_past: int, min_chunk: int) -> int:
    """Move the runs of `s`'s cache after its first `n_past` tokens that the prompt continues with
    (each at least `min_chunk` long) to their places; how many prompt tokens its cells now hold."""
    cache = s.cached
    head_c = head_p = n_past
    while head_c < len(cache) and head_p < len(prompt):
        n_match = 0
        while (
            head_c + n_match < len(cache)
            and head_p + n_match < len(prompt)
            and cache[head_c + n_match] == prompt[head_p + n_match]
        ):
            n_match += 1
        if n_match >= min_chunk:
            model.forget(s.seq_id, head_p, head_c)
            model.move(s.seq_id, head_c, head_c + n_match, head_p - head_c)
            cache[head_p : head_p + n_match] = prompt[head_p : head_p + n_match]
            n_past += n_match
            head_c += n_match
            head_p += n_match
        else:
            head_c += 1
    return n_past
