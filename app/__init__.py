"""An OpenAI-compatible inference server for llama.cpp models, as a Flask application."""

from __future__ import annotations

from typing import Any

from flask import Flask
from flask.json.provider import DefaultJSONProvider

from app.settings.config import Config
from app.settings.current import install


def _store(config: Config, under_gunicorn: bool) -> Any:
    """The worker's store (None with LLM_STORE=off). Under gunicorn, the master migrated it already."""
    if not config.store:
        return None
    from app.store import migrate
    from app.store.opening import open_store

    if not under_gunicorn:
        migrate.upgrade(config.store_url)
    return open_store(config.store_url, config.store_ttl)


class _InOrderJSON(DefaultJSONProvider):
    sort_keys = False  # keep OpenAI's field order, as clients print it


def create_app(config: Config | None = None, engine: Any = None) -> Flask:
    """Build the app: settings from the environment unless given, one engine per process.

    Tests pass `engine` to run the views without loading a model.
    """
    # Imported here, as Flask's tutorial does, so that gunicorn.conf.py can read the
    # settings in the master without loading llama.cpp or gevent before fork.
    from app import api
    from app.engine.embedding_engine import EmbeddingEngine
    from app.engine.engine import Engine
    from app.serving import peers, prefix_board
    from app.telemetry import metrics, request_log, worker_board
    from app.telemetry.engine_figures import EngineFigures

    app = Flask(__name__, static_folder=None)  # the pages serve their own files (app/ui/static)
    config = config or Config.from_env()
    worker = peers.this_worker
    if worker is not None:  # under gunicorn: this worker holds one model of LLM_MODELS
        config = config.for_model(worker.model)
    install(app, config)
    app.config.update(MAX_CONTENT_LENGTH=config.max_body_bytes)
    app.json = _InOrderJSON(app)
    request_log.configure_logging(json_lines=config.log_format == "json")

    if engine is None:
        if worker is not None:
            worker.capacity = 1 if config.embedding else config.parallel
        figures = (
            EngineFigures(
                worker.publish,
                worker.became_ready,
                worker_board.board,
                worker.slot,
                prefix_board.publisher(worker.slot),
            )
            if worker
            else EngineFigures()
        )
        engine = (EmbeddingEngine if config.embedding else Engine)(config, figures)
        engine.start()
        if worker is not None and worker_board.board is not None:
            worker_board.sample_greenlets(worker_board.board, worker.slot)
    app.extensions["engine"] = engine
    app.extensions["store"] = _store(config, under_gunicorn=worker is not None)

    request_log.init_app(app)  # first, so that even a 401 has an id and an access line
    api.init_app(app)
    app.register_blueprint(metrics.bp)
    if config.ui:
        from app import ui

        app.register_blueprint(ui.bp)
    return app
