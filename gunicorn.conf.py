"""gunicorn settings: gevent workers, one model each, all values from LLM_* variables."""

from app.config import exit_on_bad_config

# Validated here, in the master, so a bad value stops start-up with one line.
_config = exit_on_bad_config()

bind = _config.bind
workers = _config.workers
worker_class = "gevent"
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
accesslog = "-"
errorlog = "-"
loglevel = "info"
control_socket_disable = True  # several instances may share a host (tests, multi-backend)
