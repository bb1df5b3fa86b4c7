"""An OpenAI-compatible inference server for llama.cpp models, as a Flask application."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from flask import Flask

from app import chat, completions, errors, models
from app.config import Config
from app.engine import Engine


def create_app(
    config: Config | None = None, engine: Any = None, overrides: Mapping[str, Any] | None = None
) -> Flask:
    """Build the app: settings from the environment unless given, one engine per process.

    Tests pass `engine` to run the views without loading a model.
    """
    app = Flask(__name__)
    config = config or Config.from_env()
    app.config.update(LLM=config, MAX_CONTENT_LENGTH=config.max_body_bytes)
    app.config.update(overrides or {})
    app.json.sort_keys = False  # keep OpenAI's field order, as clients print it
    logging.basicConfig(level=logging.INFO)

    if engine is None:
        engine = Engine(config)
        engine.load()
    app.extensions["engine"] = engine

    errors.init_app(app)
    for module in (chat, completions, models):
        app.register_blueprint(module.bp)
    return app
