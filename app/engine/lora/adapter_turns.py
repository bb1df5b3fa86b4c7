"""LoRA scales take turns at the context: llama.cpp applies adapters to all of it, one set per step."""

from __future__ import annotations

from collections.abc import Callable

from app.engine.choice import Choice
from app.engine.sequence import Sequence

# Steps a set of scales keeps the context before another set's turn (when sets differ).
# Changing adapters costs llama.cpp a new graph, so turning every step would cost each step
# that much (measured: four sets turning every step ran at 74 % of llama-server's pace).
ADAPTER_TURN = 16

Held = list[tuple[Sequence, Choice]]


class AdapterTurns:
    """Which choices a step decodes: all of them while they share one set of LoRA scales; else those
    of one set, which keeps its turn for ADAPTER_TURN steps, then the set that waited longest goes."""

    def __init__(self, apply: Callable[[tuple[float, ...]], None]) -> None:
        self._apply = apply  # sets the context's adapters (a no-op when unchanged)
        self._steps = 0
        self._last_ran: dict[tuple[float, ...], int] = {}  # scales -> the step they last decoded in
        self._turn: tuple[float, ...] = ()  # the scales decoding now ...
        self._turn_steps = 0  # ... for this many steps in a row

    def pick(self, holding: Held) -> Held:
        """The choices of `holding` (busy sequences with their choices) to decode this step."""
        sets = {s.adapters for s, _ in holding}
        if len(sets) > 1:
            self._last_ran = {scales: self._last_ran.get(scales, -1) for scales in sets}  # held now
            turn = self._turn
            if turn not in sets or self._turn_steps >= ADAPTER_TURN:
                waiting = sets - {turn}
                turn = min(waiting, key=lambda scales: (self._last_ran[scales], scales))
            holding = [(s, choice) for s, choice in holding if s.adapters == turn]
        if holding:
            scales = holding[0][0].adapters
            self._turn_steps = self._turn_steps + 1 if scales == self._turn else 1
            self._turn, self._steps = scales, self._steps + 1
            self._last_ran[scales] = self._steps
            self._apply(scales)
        return holding
