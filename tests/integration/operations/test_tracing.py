"""OpenTelemetry traces: spans exported over OTLP/HTTP to a real receiver, with the parents they should have.

The real server (two gevent workers, one model each, so a request for the other's model
is relayed) exports to a receiver built from opentelemetry-proto's messages on loopback.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator

import httpx
import openai
import pytest

from app.settings.values import default_model_path
from app.telemetry import tracing
from harness.servers import Server, serving_models
from tests.support.otlp_receiver import ReceivedSpan, Receiver
from tests.support.procs import connection_to_each_worker
from tests.support.waits import wait_until

SERVER, INTERNAL, CLIENT = 2, 1, 3  # opentelemetry-proto's span kinds


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    started = Receiver()
    yield started
    started.close()


@pytest.fixture(scope="module")
def server(receiver: Receiver) -> Iterator[Server]:
    models = [{"id": "a", "path": default_model_path()}, {"id": "b", "path": default_model_path()}]
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_BSP_SCHEDULE_DELAY": "50",  # milliseconds between batches: the test waits less
        "OTEL_SERVICE_NAME": "llm-under-test",
    }
    with serving_models(models, answers=4, **env) as started:
        yield started


def traceparent() -> tuple[str, str, str]:
    """A client's W3C traceparent header: (header, trace id, its span id)."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def spans_of(
    receiver: Receiver, trace_id: str, wanted: set[str], client_span: str
) -> dict[str, list[ReceivedSpan]]:
    """The trace's spans by name, once every name of `wanted` has arrived and every span's parent
    has too (each worker exports its own spans, in batches of its own: a relayed request's
    peer may be heard from first)."""

    def arrived() -> bool:
        spans = receiver.of_trace(trace_id)
        ids = {span.span_id for span in spans} | {client_span}
        return wanted <= {span.name for span in spans} and all(span.parent_id in ids for span in spans)

    wait_until(arrived, 30, f"spans {sorted(wanted)}")
    by_name: dict[str, list[ReceivedSpan]] = {}
    for span in receiver.of_trace(trace_id):
        by_name.setdefault(span.name, []).append(span)
    return by_name


def ancestry(receiver: Receiver, span: ReceivedSpan) -> list[str]:
    """The ids of `span`'s parents, nearest first, up to the first one not exported (the client's)."""
    ids = {each.span_id: each for each in receiver.of_trace(span.trace_id)}
    parents = [span.parent_id]
    while parents[-1] in ids:
        parents.append(ids[parents[-1]].parent_id)
    return parents


def test_a_streamed_chat_continues_the_clients_trace_with_its_stages(
    server: Server, receiver: Receiver
) -> None:
    header, trace_id, client_span = traceparent()
    with openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0) as sdk:
        stream = sdk.chat.completions.create(
            model="a",
            messages=[{"role": "user", "content": "Name three colours."}],
            max_tokens=12,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
            extra_headers={"traceparent": header},
        )
        usage = [chunk.usage for chunk in stream if chunk.usage is not None][0]
    wanted = {"POST /v1/chat/completions", "chat a", "queue", "prefill", "decode"}
    spans = spans_of(receiver, trace_id, wanted, client_span)
    (generation,) = spans["chat a"]
    # Served where it landed, or relayed first to the worker holding "a": the span that served
    # it is the generation's parent, and the first one's parent is the client's span.
    (request,) = [span for span in spans["POST /v1/chat/completions"] if span.span_id == generation.parent_id]
    assert ancestry(receiver, generation)[-1] == client_span
    assert request.kind == SERVER and request.attributes["http.response.status_code"] == 200
    assert request.resource["service.name"] == "llm-under-test"
    assert generation.kind == INTERNAL
    assert generation.attributes["gen_ai.operation.name"] == "chat"
    assert generation.attributes["gen_ai.request.model"] == "a"
    assert generation.attributes["gen_ai.usage.input_tokens"] == usage.prompt_tokens
    assert generation.attributes["gen_ai.usage.output_tokens"] == usage.completion_tokens
    assert generation.attributes["gen_ai.request.max_tokens"] == 12
    assert generation.attributes["gen_ai.response.finish_reasons"] == ["length"]
    stages = [spans[name][0] for name in ("queue", "prefill", "decode")]
    assert all(stage.parent_id == generation.span_id for stage in stages)
    assert generation.start == stages[0].start <= stages[0].end == stages[1].start
    assert stages[1].end == stages[2].start <= stages[2].end == generation.end <= request.end


def test_a_relayed_request_is_a_child_of_the_worker_that_relayed_it(
    server: Server, receiver: Receiver
) -> None:
    held = connection_to_each_worker("127.0.0.1", server.port, server.process.pid, 2)
    traces = []
    try:
        for connection in held.values():  # one of the two holds "b"; the other relays to it
            header, trace_id, client_span = traceparent()
            body = {"model": "b", "prompt": "Once upon a time", "max_tokens": 4, "temperature": 0}
            headers = {"Content-Type": "application/json", "traceparent": header}
            connection.request("POST", "/v1/completions", json.dumps(body), headers)
            reply = connection.getresponse()
            assert reply.status == 200, reply.read()
            reply.read()
            traces.append((trace_id, client_span))
    finally:
        for connection in held.values():
            connection.close()
    shapes = []
    for trace_id, client_span in traces:
        spans = spans_of(receiver, trace_id, {"POST /v1/completions", "text_completion b"}, client_span)
        requests = spans["POST /v1/completions"]
        (generation,) = spans["text_completion b"]
        outer = [span for span in requests if span.parent_id == client_span]
        assert len(outer) == 1, requests
        if len(requests) == 2:  # relayed: the peer's span hangs under this worker's
            (inner,) = [span for span in requests if span is not outer[0]]
            assert inner.parent_id == outer[0].span_id
            assert inner.resource["process.pid"] != outer[0].resource["process.pid"]
            assert generation.parent_id == inner.span_id
        else:
            assert generation.parent_id == outer[0].span_id
        shapes.append(len(requests))
    assert sorted(shapes) == [1, 2]  # one worker served it, the other relayed it


def test_a_stored_response_has_its_store_calls_in_the_trace(server: Server, receiver: Receiver) -> None:
    header, trace_id, client_span = traceparent()
    answer = httpx.post(
        server.url + "/v1/responses",
        json={"model": "a", "input": "Say hello.", "max_output_tokens": 8, "temperature": 0},
        headers={"traceparent": header},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    spans = spans_of(receiver, trace_id, {"POST /v1/responses", "store ResponseStore.save"}, client_span)
    (save,) = spans["store ResponseStore.save"]
    assert save.kind == CLIENT and save.attributes["db.system.name"] == "sqlite"
    ids = {span.span_id: span.name for span in receiver.of_trace(trace_id)}
    *within, client = ancestry(receiver, save)
    assert client == client_span and within and {ids[parent] for parent in within} == {"POST /v1/responses"}


def test_every_route_given_an_operation_is_served(server: Server) -> None:
    served = httpx.get(server.url + "/openapi.json", timeout=30).json()["paths"]
    assert set(tracing.OPERATIONS) <= {path for path, ops in served.items() if "post" in ops}


def test_probes_make_no_spans_and_a_request_without_traceparent_starts_a_trace(
    server: Server, receiver: Receiver
) -> None:
    before = len(receiver.spans)
    for _ in range(5):
        assert httpx.get(server.url + "/health").status_code == 200
    models = httpx.get(server.url + "/v1/models", timeout=30)
    assert models.status_code == 200
    wait_until(
        lambda: any(s.name == "GET /v1/models" for s in receiver.spans[before:]), 30, "the models span"
    )
    assert not any(span.name.startswith("GET /health") for span in receiver.spans)
    (listed,) = [s for s in receiver.spans[before:] if s.name == "GET /v1/models"]
    assert listed.parent_id == "" and listed.kind == SERVER
