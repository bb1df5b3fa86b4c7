"""LoRA adapters loaded and freed while the model serves: changes the batcher makes between two steps."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from collections.abc import Sequence as Listed
from dataclasses import dataclass
from typing import Protocol

from app.engine.sequence import Sequence
from app.settings.models import LoraSpec


@dataclass(eq=False)
class AdapterChange:
    """Places of the model's adapter list to fill (index, GGUF path) or empty (index, None); `done`
    is told, from the batcher's thread, why each place that could not be filled failed."""

    places: list[tuple[int, str | None]]
    done: Callable[[dict[int, str]], None]


def changed_places(
    places: list[str | None], loras: Listed[LoraSpec]
) -> tuple[list[str | None], list[tuple[int, str | None]]]:
    """The model's places once as `loras` say (each loaded or empty), and those that change."""
    wanted = [lora.path if lora.loaded else None for lora in loras]
    have = places + [None] * (len(wanted) - len(places))
    changes = [(n, path) for n, path in enumerate(wanted) if path != have[n]]
    for n, path in changes:  # a place that fails is not tried again: the change's result says why
        have[n] = path
    return have, changes


def global_scales(scales: list[float], loras: Listed[LoraSpec]) -> list[float]:
    """The global scales over `loras`' places: new ones at their own (0 for those loaded at run
    time), unloaded ones at 0."""
    extended = scales + [lora.scale for lora in loras[len(scales) :]]
    return [scale if lora.loaded else 0.0 for scale, lora in zip(extended, loras, strict=False)]


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
