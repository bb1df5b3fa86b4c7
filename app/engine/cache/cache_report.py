"""What routing is told of a worker's cache: the rows (sequences, saved states) whose blocks changed."""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Sequence as Tokens

from app.engine.cache.host_cache import HostCache
from app.engine.cache.prefix_blocks import block_hashes, resumable_only
from app.engine.context import BatchContext
from app.engine.memory import Resumable
from app.engine.scheduling import common_prefix
from app.engine.sequence import Sequence

Row = tuple[int, tuple[int, ...]]  # a row of the routing board and the block hashes it holds now


class CacheReport:
    """Which sequences' cells (and saved states) changed since routing last heard, and their blocks."""

    def __init__(self) -> None:
        self._reported: dict[int, object] = {}  # per row: what it held when last reported

    def changes(
        self, sequences: Iterable[Sequence], host_cache: HostCache | None, model: BatchContext
    ) -> tuple[Row, ...]:
        """Rows whose cells hold other tokens than last reported: a new prompt taken, an answer
        ended, a cache dropped (a busy sequence reports its prompt: its cells will hold it); then
        the host cache's saved states, after the sequences' rows. Only blocks a prompt can resume
        into are reported (all of them, but on a sliding window or a recurrent state)."""
        memory = model.memory_kind
        changed = []
        count = 0
        for s in sequences:
            count += 1
            choice = s.choice
            if choice is not None:
                key: object = ("busy", id(choice))
                if self._reported.get(s.seq_id) == key:
                    continue  # the common case, every step of a stream: reported when it began
                tokens = choice.plan.prompt_tokens
                # Its cells will hold the prompt; where they resume is known once evaluated: until
                # then, at its checkpoints (those it keeps, those it will take) and its end.
                points = s.checkpoints.positions + choice.stops
                resumable = Resumable(len(tokens), 0 if memory.cuts_anywhere else len(tokens), points)
            else:
                tokens = s.cached
                resumable = s.resumable(memory, model) if not memory.cuts_anywhere else Resumable(len(tokens))
                key = (len(tokens), resumable, s.scope)
            if self._reported.get(s.seq_id) != key:
                self._reported[s.seq_id] = key
                changed.append((s.seq_id, tuple(resumable_only(block_hashes(tokens, s.scope), resumable))))
        if host_cache is not None and self._reported.get(-1) != host_cache.version:
            self._reported[-1] = host_cache.version
            for row, hashes in enumerate(host_cache.published(), start=count):
                changed.append((row, tuple(hashes)))
        return tuple(changed)


def closest(
    sequences: Iterable[Sequence], host_cache: HostCache | None, prompt: Tokens[int], scope: str
) -> tuple[int, list[int]] | None:
    """Of the prompts the cache holds for cache `scope` (sequences' cells, saved states), the one
    sharing the longest prefix with `prompt`: (tokens shared, its tokens); None if it holds none.
    Read on the hub from copies of lists the batcher may be changing: a diagnosis of a cache miss,
    not a plan; another scope's prompts are never compared (what it shares would tell of them)."""
    held: list[Tokens[int]] = [list(s.cached) for s in sequences if s.scope == scope]  # copied
    if host_cache is not None:
        held += host_cache.held(scope)  # tuples: never changed
    found = max(((common_prefix(tokens, prompt), tokens) for tokens in held if tokens), default=None,
                key=lambda each: (each[0], -len(each[1])))  # fmt: skip
    return None if found is None else (found[0], list(found[1]))
