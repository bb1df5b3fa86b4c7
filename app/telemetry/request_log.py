"""Request ids and logs: an id on every log line of a request, and one access line per request."""

from __future__ import annotations

import contextvars
import json
import logging
import re
import time
import uuid

from flask import Flask, Response, g, request

from app.settings.current import current_config
from app.telemetry import metrics
from app.telemetry.request_stats import RequestStats

log = logging.getLogger("app.access")

# Greenlet-local under gevent (greenlet has its own contextvars context).
request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
_SAFE_ID = re.compile(r"[A-Za-z0-9._:@/+=-]{1,128}")


class RequestIdFilter(logging.Filter):
    """Put the current request's id on every record (`-` outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = request_id.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line, for log collectors."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
            "request_id": getattr(record, "request_id", "-"),
            "message": record.getMessage(),
        }
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


TEXT_FORMAT = "[%(asctime)s] [%(process)d] [%(levelname)s] [%(request_id)s] %(name)s: %(message)s"
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


class TextFormatter(logging.Formatter):
    """gunicorn-shaped text lines, one per record: a control character in a message (a client's text
    quoted in a warning) is written escaped, so that no message can end its line and forge the next.
    A traceback, which the formatter itself appends, keeps its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        record.message = _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", record.message)
        return super().formatMessage(record)


def configure_logging(json_lines: bool) -> None:
    """Log to stderr, as text shaped like gunicorn's lines or as JSON lines."""
    handler = logging.StreamHandler()
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(
        JsonFormatter() if json_lines else TextFormatter(TEXT_FORMAT, "%Y-%m-%d %H:%M:%S %z")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)


_QUIET_ROUTES = frozenset({"/metrics", "/health", "/health/ready"})


def _begin() -> None:
    incoming = request.headers.get("X-Request-ID", "")
    g.request_id = incoming if _SAFE_ID.fullmatch(incoming) else uuid.uuid4().hex
    # Not reset after the response: a stream logs after the view returns, in this same
    # greenlet, and the next request on the connection sets its own id.
    request_id.set(g.request_id)
    g.stats = RequestStats()


def _finish(response: Response) -> Response:
    response.headers["X-Request-ID"] = g.request_id
    route = request.url_rule.rule if request.url_rule else "unmatched"
    stats: RequestStats = g.stats
    rid = g.request_id
    # Streams end long after this function: log when the last byte has gone.
    method, model = request.method, current_config().model_id
    response.call_on_close(lambda: _access_line(rid, method, route, model, response.status_code, stats))
    return response


def _access_line(rid: str, method: str, route: str, model: str, status: int, stats: RequestStats) -> None:
    if stats.relayed:
        return
    seconds = time.monotonic() - stats.started
    # Probes and scrapes come every few seconds (an endpoint picker: 20 a second); their
    # lines would bury the requests. They are still counted, and any failure is logged.
    if status == 200 and route in _QUIET_ROUTES:
        metrics.record_request(route, status, stats, model, seconds)
        return
    fields = {
        "method": method,
        "route": route,
        "model": model,  # this worker's: a request for another model is relayed, and logged there
        "status": status,
        "duration": round(seconds, 4),
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.completion_tokens,
        "cached_tokens": stats.cached_tokens,
        "ttft": None if stats.ttft is None else round(stats.ttft, 4),
        "cancelled": stats.cancelled,
    }
    if stats.dropped_messages:
        fields["dropped_messages"] = stats.dropped_messages  # LLM_CONTEXT_OVERFLOW, or truncation
    if stats.key_name is not None:
        fields["key"] = stats.key_name  # the key's name: the key itself is never logged
    log.info(" ".join(f"{k}={v}" for k, v in fields.items()), extra={"request_id": rid, "fields": fields})
    metrics.record_request(route, status, stats, model, seconds)


def init_app(app: Flask) -> None:
    """Give each request an id, echo it back, and log one line when the response is done."""
    app.before_request(_begin)
    app.after_request(_finish)
