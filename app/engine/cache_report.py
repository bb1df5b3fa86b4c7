"""What routing is told of a worker's cache: the rows (sequences, kept states) whose blocks changed."""

from __future__ import annotations

from collections.abc import Iterable

from app.engine.host_cache import HostCache
from app.engine.prefix_blocks import block_hashes
from app.engine.sequence import Sequence

Row = tuple[int, tuple[int, ...]]  # a row of the routing board and the block hashes it holds now


class CacheReport:
    """Which sequences' cells (and kept states) changed since routing last heard, and their blocks."""

    def __init__(self) -> None:
        self._reported: dict[int, object] = {}  # per row: what it held when last reported

    def changes(self, sequences: Iterable[Sequence], host_cache: HostCache | None) -> tuple[Row, ...]:
        """Rows whose cells hold other tokens than last reported: a new prompt taken, an answer
        ended, a cache dropped (a busy sequence reports its prompt: its cells will hold it); then
        the host cache's kept states, after the sequences' rows."""
        changed = []
        count = 0
        for s in sequences:
            count += 1
            key: object = ("busy", id(s.choice)) if s.choice is not None else len(s.cached)
            if self._reported.get(s.seq_id) != key:
                self._reported[s.seq_id] = key
                tokens = s.choice.request.prompt_tokens if s.choice is not None else s.cached
                changed.append((s.seq_id, tuple(block_hashes(tokens))))
        if host_cache is not None and self._reported.get(-1) != host_cache.version:
            self._reported[-1] = host_cache.version
            for row, hashes in enumerate(host_cache.published(), start=count):
                changed.append((row, tuple(hashes)))
        return tuple(changed)
