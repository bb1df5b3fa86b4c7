"""An OpenAI-compatible inference server for llama.cpp models, as a Flask application."""

from __future__ import annotations

import os
from typing import Any

from flask import Flask
from flask.json.provider import DefaultJSONProvider

from app.settings import otel
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


def _unloaded_from(state: Any, count: Any) -> Any:
    """What a pool worker's unload (or a start-up worker's sleep) changes: `count(model, reason)`, its
    row of figures cleared, and nothing of its cache left to route by (`state`: its WorkerState)."""
    board, seat = state.shared.board, state.me.seat

    def unloaded(model: str, reason: str) -> None:
        count(model, reason)
        last_load = board.read(seat).load_seconds  # its figures start over; what its last load took stays
        board.clear(seat)
        board.record_load_seconds(seat, last_load)
        state.shared.prefixes.clear(seat)

    return unloaded


def _adapters_by_seat(state: Any, base: Config, registry: Any) -> Any:
    """For the metrics: each live worker's seat and the ids of its model's LoRA adapters, by place
    ("" for an empty one); None outside gunicorn."""
    if state is None:
        return None
    table = state.shared.table

    def read() -> dict[int, tuple[str, ...]]:
        models = registry.overlay(base).models
        held = [peer for peer in table.peers() if peer.live and 0 <= peer.model < len(models)]
        return {
            peer.seat: tuple(lora.id if lora.loaded else "" for lora in models[peer.model].loras)
            for peer in held
        }

    return read


def _persist(engine: Any, seconds: float) -> None:
    """Write the worker's KV cache to the disk tier (LLM_CACHE_DISK_MB) as it stops."""
    import logging

    persist = getattr(engine, "persist_cache", None)  # an engine of the model it holds, if any
    if persist is not None and not persist(seconds):
        logging.getLogger("app.engine.batcher").warning("the KV cache was not all written to disk in time")


class _InOrderJSON(DefaultJSONProvider):
    sort_keys = False  # keep OpenAI's field order, as clients print it

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        # JSON nested deeper than Python recurses is bad JSON (a 400 wherever a body is read), never
        # a RecursionError: werkzeug's get_json handles ValueError only.
        try:
            return super().loads(s, **kwargs)
        except RecursionError:
            raise ValueError("the JSON is nested too deeply") from None


def create_app(config: Config | None = None, engine: Any = None) -> Flask:
    """Build the app: settings from the environment unless given, one engine per process.

    Tests pass `engine` to run the views without loading a model.
    """
    # Imported here, as Flask's tutorial does, so that gunicorn.conf.py can read the
    # settings in the master without loading llama.cpp or gevent before fork.
    from app import api, workers
    from app.engine.embedding_engine import EmbeddingEngine
    from app.engine.engine import Engine
    from app.serving import global_scales, prefix_board
    from app.serving.runtime_adapters import Registry
    from app.telemetry import adapter_load, metrics, request_log, worker_board
    from app.telemetry.engine_figures import EngineFigures

    app = Flask(__name__, static_folder=None)  # the pages serve their own files (app/ui/static)
    config = base = config or Config.from_env()
    workers.init_app(app)  # under gunicorn, what this worker shares with the others
    state = workers.of(app)
    worker = None if state is None else state.me
    if worker is not None:  # under gunicorn: this worker holds one model of LLM_MODELS
        config = config.for_model(worker.model)
    adapters = Registry(None if state is None else state.shared.table.rundir)
    install(app, config, adapters.overlay)
    app.extensions["lora_registry"] = adapters
    app.config.update(MAX_CONTENT_LENGTH=config.max_body_bytes)
    app.json = _InOrderJSON(app)
    request_log.configure_logging(json_lines=config.log_format == "json")

    def make_engine(held: Config) -> Any:
        """An engine for the model `held` names, reporting to this worker's figures; not yet started."""
        figures = (
            EngineFigures(
                state.me.publish,
                state.me.became_ready,
                state.shared.board,
                state.me.seat,
                prefix_board.publisher(state.shared.prefixes, state.me.seat),
            )
            if state is not None
            else EngineFigures()
        )
        held = adapters.overlay(held)  # with the LoRA adapters loaded at run time, in their places
        # A model loaded on demand that fails to load leaves its pool worker up (the request says why).
        made = (EmbeddingEngine if held.embedding else Engine)(held, figures, exit_on_failure=worker_pinned)
        if isinstance(made, Engine):
            made.adapter_list = lambda: adapters.overlay(held).model.loras
            scales = global_scales.saved(held.model, None if state is None else state.shared.table)
            if scales is not None:  # set by POST /lora-adapters since start-up
                made.lora_scales = scales
        return made

    worker_pinned = worker is None or not worker.pool
    if engine is None and not worker_pinned:
        from app.serving.model_holder import ModelHolder, NoModel

        assert state is not None and worker is not None, "a pool worker runs under gunicorn"
        engine = NoModel(config)
        reports = (metrics.model_loaded, _unloaded_from(state, metrics.count_unload))
        app.extensions["model_holder"] = ModelHolder(app, base, make_engine, worker, reports)
    if engine is None:
        if worker is not None:
            worker.capacity = 1 if config.embedding else config.parallel
        engine = make_engine(config)
        engine.start()
        if state is not None:  # a start-up worker: its model may sleep (LLM_SLEEP_IDLE, POST /sleep)
            from app.serving.sleep import Sleeper

            slept = (_unloaded_from(state, metrics.model_slept), metrics.model_woke)
            app.extensions["sleeper"] = Sleeper(app, config, make_engine, state.me, slept)
    if state is not None:
        worker_board.sample_greenlets(state.shared.board, state.me.seat)
        adapter_load.install(state.shared.board, state.me.seat)
    app.extensions["engine"] = engine
    app.extensions["store"] = _store(config, under_gunicorn=worker is not None)
    if config.cache_disk_mb and worker is not None:  # a stopping worker's cells, for the next server
        from app.serving import at_stop

        at_stop.register(lambda seconds: _persist(app.extensions["engine"], seconds))

    request_log.init_app(app)  # first, so that even a 401 has an id and an access line
    if otel.tracing_wanted(os.environ):  # the SDK's own variables (OTEL_EXPORTER_OTLP_ENDPOINT, ...)
        from app.store import errors as store_errors
        from app.telemetry import tracing

        store_errors.trace_calls(tracing.init_app(app, config, tracing.provider_tracer(config)))
    api.init_app(app)
    metrics.init_app(
        app, None if state is None else state.shared.board, _adapters_by_seat(state, base, adapters)
    )
    if config.ui:
        from app import ui

        app.register_blueprint(ui.bp)
    api.openapi.check_documented(app)  # every API route declares its operation, or no start
    return app
