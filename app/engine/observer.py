"""What the engine reports while it runs, for whoever listens (telemetry, the peer table)."""

from __future__ import annotations


class EngineObserver:
    """Hears the engine's figures; this base hears nothing, so the engine needs no listener."""

    def loaded(self, seconds: float) -> None:
        """The model has loaded, taking `seconds`."""

    def load_changed(self, admitted: int, running: int) -> None:
        """The worker now holds `admitted` requests, of which `running` are generating."""
