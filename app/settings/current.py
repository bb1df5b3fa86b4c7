"""The settings of the app serving the current request, typed (rather than `current_app.config["LLM"]`)."""

from __future__ import annotations

from collections.abc import Callable

from flask import Flask, current_app

from app.settings.config import Config

_KEY = "LLM"
_OVERLAY = "LLM_OVERLAY"


def install(app: Flask, config: Config, overlay: Callable[[Config], Config] | None = None) -> None:
    """Make `config` the settings `current_config()` returns inside `app`, as `overlay` changes them
    at run time (the LoRA adapters loaded and unloaded since start-up)."""
    app.config[_KEY] = config
    app.config[_OVERLAY] = overlay


def config_of(app: Flask) -> Config:
    """The settings of `app`."""
    config = app.config[_KEY]
    assert isinstance(config, Config), "create_app installs the settings"
    overlay = app.config.get(_OVERLAY)
    return config if overlay is None else overlay(config)


def current_config() -> Config:
    """The settings of the app handling this request."""
    return config_of(current_app)
