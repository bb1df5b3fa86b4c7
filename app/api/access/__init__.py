"""Who may call the API and how much (API keys, then each key's limits) and when (not while draining)."""

from __future__ import annotations

from flask import Flask

from app.api.access import draining, keys, limits


def init_app(app: Flask) -> None:
    """Refuse work while draining; then check keys, then limits (which need the key), before every request."""
    draining.init_app(app)
    keys.init_app(app)
    limits.init_app(app)
