"""The settings of the app serving the current request, typed (rather than `current_app.config["LLM"]`)."""

from __future__ import annotations

from flask import Flask, current_app

from app.settings.config import Config

_KEY = "LLM"


def install(app: Flask, config: Config) -> None:
    """Make `config` the settings `current_config()` returns inside `app`."""
    app.config[_KEY] = config


def config_of(app: Flask) -> Config:
    """The settings of `app`."""
    config = app.config[_KEY]
    assert isinstance(config, Config), "create_app installs the settings"
    return config


def current_config() -> Config:
    """The settings of the app handling this request."""
    return config_of(current_app)
