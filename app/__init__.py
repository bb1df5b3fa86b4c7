"""An OpenAI-compatible inference server for llama.cpp models, as a Flask application."""

from __future__ import annotations

from typing import Any

from flask import Flask

from app.config import Config


def create_app(config: Config | None = None, engine: Any = None) -> Flask:
    """Build the app: settings from the environment unless given, one engine per process.

    Tests pass `engine` to run the views without loading a model.
    """
    # Imported here, as Flask's tutorial does, so that gunicorn.conf.py can read
    # app.config in the master without loading llama.cpp or gevent before fork.
    from flask_cors import CORS

    from app import auth, balance, chat, completions, errors, metrics, models, openapi, requestlog
    from app.engine import Engine

    app = Flask(__name__)
    config = config or Config.from_env()
    app.config.update(LLM=config, MAX_CONTENT_LENGTH=config.max_body_bytes)
    app.json.sort_keys = False  # keep OpenAI's field order, as clients print it
    requestlog.configure_logging(json_lines=config.log_format == "json")

    if engine is None:
        worker = balance.this_worker

        def on_load_change(admitted: int, running: bool) -> None:
            metrics.record_load(admitted, running)
            if worker is not None:
                worker.publish(admitted)

        engine = Engine(config, on_load_change=on_load_change)
        engine.load()
    app.extensions["engine"] = engine

    requestlog.init_app(app)  # first, so that even a 401 has an id and an access line
    auth.init_app(app)
    if config.cors_origins:
        CORS(
            app,
            origins=list(config.cors_origins),
            expose_headers=["X-Request-ID", "Retry-After"],
            allow_headers=["Authorization", "Content-Type", "X-Request-ID"],
            max_age=600,
        )
    errors.init_app(app)
    for module in (chat, completions, models, metrics):
        app.register_blueprint(module.bp)
    openapi.init_app(app)
    return app
