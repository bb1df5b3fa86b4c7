"""LoRA adapters loaded and freed while the model serves: changes the batcher makes between two steps."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from app.engine.sequence import Sequence


@dataclass(eq=False)
class AdapterChange:
    """Places of the model's adapter list to fill (index, GGUF path) or empty (index, None); `done`
    is told, from the batcher's thread, why each place that could not be filled failed."""

    places: list[tuple[int, str | None]]
    done: Callable[[dict[int, str]], None]


class HoldsAdapters(Protocol):
    def load_adapter(self, index: int, path: str) -> None: ...

    def free_adapter(self, index: int) -> None: ...


class AdapterPlaces:
    """The batcher's side: fills a place at once; frees one only once no busy sequence decodes with
    it (a running stream keeps the adapter it started with)."""

    def __init__(self, model: HoldsAdapters) -> None:
        self.model = model
        self._freeing: set[int] = set()

    def change(self, change: AdapterChange, sequences: Iterable[Sequence]) -> None:
        failed: dict[int, str] = {}
        for index, path in change.places:
            if path is None:
                self._freeing.add(index)
                continue
            self._freeing.discard(index)
            try:
                self.model.load_adapter(index, path)
            except ValueError as exc:
                failed[index] = str(exc)
        self.free_unused(sequences)
        change.done(failed)

    def free_unused(self, sequences: Iterable[Sequence]) -> None:
        """Free the adapters waiting for it that no busy sequence decodes with any more."""
        if not self._freeing:
            return
        used = {n for s in sequences if s.busy for n, scale in enumerate(s.adapters) if scale}
        for index in self._freeing - used:
            self.model.free_adapter(index)
        self._freeing &= used
