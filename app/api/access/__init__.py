"""Who may call the API and how much: API keys, then each key's limits, checked before any view."""

from __future__ import annotations

from flask import Flask

from app.api.access import keys, limits


def init_app(app: Flask) -> None:
    """Check keys, then limits (which need the key), before every request."""
    keys.init_app(app)
    limits.init_app(app)
