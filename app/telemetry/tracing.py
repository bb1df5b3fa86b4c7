"""OpenTelemetry traces over OTLP: a span per request (continuing its traceparent), its generation, the store.

On only when the SDK's own variables ask for it (OTEL_EXPORTER_OTLP_ENDPOINT, see
app/settings/otel.py); otherwise nothing of OpenTelemetry's SDK is imported. Each request
gets a SERVER span whose parent is the client's `traceparent`; a request relayed to
another worker carries this span as its parent, so the peer's span is its child. A
generation adds a span with the GenAI semantic conventions' attributes (`chat <model>`),
and under it `queue`, `prefill` and `decode`, timed from the request's own figures when
it ends (no work on the hot path but reading the clock it already reads).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from flask import Flask, Response, g, request
from opentelemetry import context, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from app.settings.config import Config
from app.telemetry.request_stats import RequestStats

_PROPAGATOR = TraceContextTextMapPropagator()
_QUIET = ("/health", "/metrics")  # probes and scrapes, many a second: no spans
# The GenAI conventions' operation of each generating route (others get no generation span).
OPERATIONS = {
    **dict.fromkeys(("/v1/chat/completions", "/api/chat", "/v1/messages", "/v1/responses"), "chat"),
    **dict.fromkeys(
        ("/v1/completions", "/completions", "/completion", "/infill", "/api/generate"), "text_completion"
    ),
}
_ASKED = {"max_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p", "seed": "seed"}


def provider_tracer(config: Config) -> Tracer:
    """A tracer whose spans go to the OTLP/HTTP endpoint the SDK's variables name, in batches."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    service = os.environ.get("OTEL_SERVICE_NAME") or "llm-server"
    resource = Resource.create(
        {"service.name": service, "process.pid": os.getpid(), "llm.model": config.model_id}
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return trace.get_tracer("llm-server")


def init_app(app: Flask, config: Config, tracer: Tracer) -> Callable[[str], Any]:
    """Trace `app`'s requests with `tracer`; what the store wraps each call in (a span)."""

    def begin() -> None:
        if request.path.startswith(_QUIET):
            return
        route = request.url_rule.rule if request.url_rule else "unmatched"
        parent = _PROPAGATOR.extract(request.headers)  # werkzeug's: any case of `traceparent`
        span = tracer.start_span(
            f"{request.method} {route}",
            context=parent,
            kind=SpanKind.SERVER,
            attributes={"http.request.method": request.method, "http.route": route, "url.path": request.path},
        )
        g.trace = (span, context.attach(trace.set_span_in_context(span)), time.time_ns(), time.monotonic())
        # Relays forward the request's headers as they came: with this span as its parent
        # there, the peer's span is a child of this one, not a sibling.
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, trace.set_span_in_context(span))
        request.environ["HTTP_TRACEPARENT"] = carrier["traceparent"]

    def finish(response: Response) -> Response:
        traced = g.pop("trace", None)
        if traced is None:
            return response
        span, token, wall, clock = traced
        span.set_attribute("http.response.status_code", response.status_code)
        if response.status_code >= 500:
            span.set_status(Status(StatusCode.ERROR))
        stats: RequestStats = g.stats
        body = request.get_json(silent=True) if request.is_json else None
        asked = body if isinstance(body, dict) else {}
        operation = OPERATIONS.get(request.url_rule.rule if request.url_rule else "")

        def close() -> None:  # the last byte has gone (a stream ends long after `finish`)
            if operation is not None and stats.submitted_at is not None and not stats.relayed:
                _generation_spans(tracer, span, stats, operation, config.model_id, asked, _walls(wall, clock))
            span.end()
            context.detach(token)

        response.call_on_close(close)
        return response

    app.before_request(begin)
    app.after_request(finish)
    return _store_spans(tracer, config.store_url)


def _walls(wall: int, clock: float) -> Callable[[float], int]:
    """Wall-clock nanoseconds of a monotonic reading, from one pair read together."""
    return lambda at: wall + int((at - clock) * 1e9)


def _generation_spans(
    tracer: Tracer, parent: Span, stats: RequestStats, operation: str, model: str, asked: dict[str, Any],
    wall: Callable[[float], int],
) -> None:  # fmt: skip
    """`<operation> <model>` with the GenAI attributes, and its queue, prefill and decode stages."""
    assert stats.submitted_at is not None, "only for a generation that was submitted"
    end = stats.last_text_at or time.monotonic()
    first = stats.started + stats.ttft if stats.ttft is not None else end
    name = asked.get("model") if isinstance(asked.get("model"), str) else model
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": "llama.cpp",
        "gen_ai.request.model": name,
        "gen_ai.response.model": name,
        "gen_ai.usage.input_tokens": stats.prompt_tokens,
        "gen_ai.usage.output_tokens": stats.completion_tokens,
        "gen_ai.usage.cache_read.input_tokens": stats.cached_tokens,
    }
    if stats.finish_reason:
        attributes["gen_ai.response.finish_reasons"] = [stats.finish_reason]
    for field, key in _ASKED.items():
        if isinstance(asked.get(field), int | float) and not isinstance(asked.get(field), bool):
            attributes[f"gen_ai.request.{key}"] = asked[field]
    under = trace.set_span_in_context(parent)
    generation = tracer.start_span(
        f"{operation} {name}", under, SpanKind.INTERNAL, attributes, start_time=wall(stats.submitted_at)
    )
    inside = trace.set_span_in_context(generation)
    sequence = stats.sequence_at or stats.submitted_at
    stages = (("queue", stats.submitted_at, sequence), ("prefill", sequence, first), ("decode", first, end))
    for stage, start, stop in stages:
        tracer.start_span(stage, inside, SpanKind.INTERNAL, start_time=wall(start)).end(
            end_time=wall(max(start, stop))
        )
    generation.end(end_time=wall(end))


def _store_spans(tracer: Tracer, store_url: str) -> Callable[[str], Any]:
    system = "postgresql" if store_url.startswith("postgresql") else "sqlite"

    @contextmanager
    def span(name: str) -> Iterator[None]:
        """A request's store call (the batch runner's polls, in no request, make no trace of their own)."""
        if not trace.get_current_span().get_span_context().is_valid:
            yield
            return
        attributes = {"db.system.name": system, "db.operation.name": name.rsplit(".", 1)[-1]}
        with tracer.start_as_current_span(f"store {name}", kind=SpanKind.CLIENT, attributes=attributes):
            yield

    return span
