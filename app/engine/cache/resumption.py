"""A sequence taken by a new prompt: keep the part of its cache the prompt shares, exactly, or none of it.

`scheduling.place` chose the sequence and the longest prefix it can resume (memory.py
says where a sliding window or a recurrent state can be picked up). Here that is done
to llama.cpp's memory: the cells after it are cut, or a checkpoint is restored and cut
there, or a state kept in host memory is brought back; failing all, the prompt is
evaluated in full, and the log says so (llama-server: "forcing full prompt re-processing").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from app.engine.cache import chunk_reuse
from app.engine.cache.host_cache import HostCache
from app.engine.cache.prefix_blocks import BLOCK
from app.engine.cache.saved_state import holds_media
from app.engine.context import BatchContext
from app.engine.sequence import Sequence

log = logging.getLogger("app.engine.batcher")


@dataclass(frozen=True)
class Resumed:
    """How a prompt started: the tokens its sequence's cells hold, and whether a checkpoint gave them
    or they were evaluated in full though the cache shared a prefix the memory could not resume."""

    tokens: int
    from_checkpoint: bool = False
    full_reprocessing: bool = False


def resume(
    model: BatchContext,
    target: Sequence,
    prompt: list[int],
    point: int,
    shared: int,
    host_cache: HostCache | None,
    adapters: tuple[float, ...] = (),
    min_chunk: int = 0,
    scope: str = "",
) -> Resumed:
    """Make `target`'s cells hold the first `point` prompt tokens (or a longer prefix from the host
    cache, if one is given, kept under the same LoRA `adapters` and cache `scope`; or, with
    `min_chunk`, runs of its cache moved to where the prompt has them: chunk_reuse.py). `shared`:
    how many its cache held, resumable or not."""
    found = host_cache.find(prompt, point, adapters, scope) if host_cache is not None else None
    overwritten = target.cached[point:]
    if host_cache is not None and (len(overwritten) >= BLOCK or holds_media(overwritten)):
        host_cache.save(model, target)  # its cells are about to hold another prompt
    if found is not None and host_cache is not None:
        saved, length = found
        restored = host_cache.restore(model, target, saved, length)
        if restored:
            return Resumed(restored, saved.resumable.from_checkpoint(length))
        point = 0  # llama.cpp refused the saved state, which dropped the sequence's own cells
    if min_chunk:
        point = min(chunk_reuse.reuse(model, target, prompt, point, min_chunk), len(prompt) - 1)
    from_checkpoint = target.resumable(model.memory_kind, model).from_checkpoint(point)
    lost = point < shared - BLOCK and not model.memory_kind.cuts_anywhere
    if lost:
        log.info(
            "the prompt shares %d cached tokens; %s at %d (%s memory, no nearer checkpoint)",
            shared,
            "it resumes" if point else "forcing full prompt re-processing from 0, not",
            point,
            model.memory_kind.name,
        )
    saved_tokens = cut(model, target, point, from_checkpoint)
    return Resumed(saved_tokens, from_checkpoint and saved_tokens > 0, lost and saved_tokens == 0)


def cut(model: BatchContext, target: Sequence, point: int, from_checkpoint: bool) -> int:
    """Keep `target`'s first `point` cached tokens (a point its `resumable` allows, restoring the
    checkpoint there first if `from_checkpoint`); what it keeps."""
    if point <= 0:
        target.drop_cache(model)
        return 0
    if from_checkpoint:
        model.load_state(target.seq_id, target.checkpoints.at(point).state, partial=True)
    if not model.forget(target.seq_id, point, -1):  # not for a point `resumable` allows: be safe
        log.warning("llama.cpp could not cut sequence %d at %d: evaluating in full", target.seq_id, point)
        target.drop_cache(model)
        return 0
    del target.cached[point:]
    target.checkpoints.keep_until(point)
    return point
