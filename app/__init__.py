"""An OpenAI-compatible inference server for llama.cpp models, as a Flask application."""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask

from app.config import Config


def create_app(config: Config | None = None, engine: Any = None) -> Flask:
    """Build the app: settings from the environment unless given, one engine per process.

    Tests pass `engine` to run the views without loading a model.
    """
    # Imported here, as Flask's tutorial does, so that gunicorn.conf.py can read
    # app.config in the master without loading llama.cpp or gevent before fork.
    from app import balance, chat, completions, errors, models, openapi
    from app.engine import Engine

    app = Flask(__name__)
    config = config or Config.from_env()
    app.config.update(LLM=config, MAX_CONTENT_LENGTH=config.max_body_bytes)
    app.json.sort_keys = False  # keep OpenAI's field order, as clients print it
    # The same line shape as gunicorn's own log, on stderr.
    logging.basicConfig(
        level=logging.INFO,
        format="[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s",
        datefmt="%Y-%m-%d %H:%M:%S %z",
    )

    if engine is None:
        worker = balance.this_worker
        engine = Engine(config, on_load_change=worker.publish if worker else None)
        engine.load()
    app.extensions["engine"] = engine

    errors.init_app(app)
    for module in (chat, completions, models):
        app.register_blueprint(module.bp)
    openapi.init_app(app)
    return app
