"""gunicorn settings: gevent workers, one model each, all values from LLM_* variables."""

import os
import sys
import tempfile
from pathlib import Path

from app import workers as app_workers
from app.engine.gguf import model_check
from app.serving import drain, peers, slot_folders
from app.settings import cpu
from app.settings.config import Config
from app.settings.models import model_for_new_worker
from app.settings.startup import exit_on_bad_config, first_load, guard_reload
from app.store import startup as store_startup
from app.workers import SharedState, WorkerState

# Validated here, in the master, so a bad value stops start-up with one line.
_config = exit_on_bad_config()
_OMP_GIVEN = "OMP_WAIT_POLICY" in os.environ

if first_load():  # not again on a reload (SIGHUP), whose bad settings keep the running workers
    # The store's schema brought up to date once, here, before any worker opens it (and before
    # gunicorn logs a line, so that a bad store is the one line a failed start prints).
    store_startup.exit_unless_migrated(_config.store)
    # Slot files' folders named by a key's place before, moved to the key's name (once).
    slot_folders.move_named_by_place(_config.slot_save_path, _config.api_keys)
    # What an entry needs of its GGUF (an embedding model's pooling), before any worker serves.
    model_check.exit_unless_servable(_config)

bind = _config.bind
# LLM_WORKERS if set (or the sum of LLM_MODELS' workers); else gunicorn's own -w,
# WEB_CONCURRENCY or GUNICORN_CMD_ARGS apply.
if _config.workers_given or _config.models_given:
    workers = _config.workers
# gunicorn's gevent worker, closing connections while the instance drains and idle
# keep-alive connections when it stops (app/serving/worker.py).
worker_class = "app.serving.worker.DrainingGeventWorker"
worker_connections = 1000
# Each worker loads its own model after fork: CUDA contexts and OpenMP pools
# do not survive fork, and gevent patches only inside the worker.
preload_app = False
# A liveness check for async workers, not a request timeout: generation runs in a
# native thread, so the worker's heartbeat keeps beating while the model works.
timeout = _config.timeout
graceful_timeout = _config.graceful_timeout
# Above the idle timeout of nginx's upstream keepalive (60 s) so a proxy never
# reuses a connection this side has just closed.
keepalive = 75
# The app writes one access line per request itself (with tokens and time to first
# token, when the stream has ended), so gunicorn's own access log stays off.
accesslog = None
errorlog = "-"
loglevel = "info"
if _config.log_format == "json":
    logconfig_dict = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "app.telemetry.request_log.JsonFormatter"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "json"}},
        "root": {"handlers": ["stderr"], "level": "INFO"},
        "loggers": {"gunicorn.error": {"handlers": ["stderr"], "level": "INFO", "propagate": False}},
    }


# What gunicorn reads of a request before the app sees it, stated rather than left implicit
# (its defaults): a request line of at most 4094 bytes (longer: 414), at most 100 headers, each
# at most 8190 bytes (more: 431). Refusals are JSON errors (app/serving/protocol_errors.py).
# The body's limit is the app's, LLM_MAX_BODY_BYTES (a 413).
limit_request_line = 4094
limit_request_fields = 100
limit_request_field_size = 8190

control_socket_disable = True  # several instances may share a host (tests, multi-backend)


def on_starting(server):
    # Once, in the master, before any worker (a reload, SIGHUP, does not run this again).
    asked = sum(spec.workers for spec in _config.models) + _config.on_demand_workers
    if _config.models_given and server.cfg.workers != asked:
        print(
            f"configuration error: LLM_MODELS asks for {asked} workers in all but gunicorn "
            f"runs {server.cfg.workers} (-w, WEB_CONCURRENCY or GUNICORN_CMD_ARGS)",
            file=sys.stderr,
        )
        sys.exit(2)
    # What the workers share (app/workers.py): the peer table of loads and relay sockets, the
    # status page's figures, per-key limits, what each worker caches, the drain flag. Memory
    # shared through fork, kept on the arbiter, which outlives reloads.
    server.llm_shared = SharedState.create()
    # prometheus_client's multiprocess mode: one directory shared by the workers,
    # emptied at start so no earlier run's figures linger (kept across reloads).
    if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="llm-metrics-")
    for stale in Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).glob("*.db"):
        stale.unlink()


def when_ready(server):
    # SIGTERM drains (not-ready at once, streams finish, then stop); a SIGHUP with a bad
    # setting keeps the running workers rather than stopping the master (app/serving/drain.py).
    shared = server.llm_shared
    drain.install(server, shared.drain, shared.table, _config.graceful_timeout)
    guard_reload(server)


def pre_fork(server, worker):
    # The model furthest below its share of workers: a dead worker's replacement holds its model.
    table = server.llm_shared.table
    worker.llm_model = model_for_new_worker(
        _config.models, table.holding(), table.pool_workers(), _config.on_demand_workers
    )
    worker.llm_slot = table.claim(worker.llm_model)


def post_fork(server, worker):
    # The worker count gunicorn settled on (-w, WEB_CONCURRENCY, GUNICORN_CMD_ARGS or
    # LLM_WORKERS): the worker's default thread count divides the usable cores by it.
    os.environ["LLM_WORKERS"] = str(server.cfg.workers)
    config = Config.from_env().for_model(worker.llm_model)
    # llama.cpp's OpenMP threads spin while idle. That is fastest for one process with
    # its cores to itself, but when workers share the cores (or a worker has one thread,
    # whose spare OpenMP thread only spins) both workers stall for seconds at a time;
    # measured here: 2 workers x 1 thread, 0.55 s per 40 tokens passive, up to 8 s spinning.
    crowded = config.n_threads == 1 or config.workers * config.n_threads > cpu.usable_cores()
    if crowded and not _OMP_GIVEN:
        os.environ["OMP_WAIT_POLICY"] = "passive"
    shared = server.llm_shared
    me = peers.Worker(shared.table, worker.llm_slot, worker.llm_model, pool=worker.llm_model == peers.POOL)
    app_workers.inherited = WorkerState(shared, me)  # read once by create_app
    worker.drain_flag = shared.drain


def post_worker_init(worker):
    # After gevent's patching, so this is a gevent socket; run() serves it like the others.
    worker.sockets.append(app_workers.inherited.me.listen())


def child_exit(server, worker):
    from prometheus_client import multiprocess

    server.llm_shared.forget(worker.llm_slot)
    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    server.llm_shared.table.close()
    server.llm_shared.limits.close()
