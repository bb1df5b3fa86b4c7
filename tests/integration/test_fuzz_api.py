"""schemathesis against the live server, from its own OpenAPI document: no 5xx, and every
response (status, headers, body) as the document says."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app.settings.values import default_model_path
from tests.support.servers import Server

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def fuzz_server() -> Iterator[Server]:
    # Small limits keep every generation short; the 2 s wall time bounds the rest.
    # A chat model and an embedding model: requests for either may land on the other's worker.
    models = [
        {"id": "chat", "path": default_model_path()},
        {"id": "embed", "path": default_model_path(), "embedding": True, "pooling": "mean"},
    ]
    server = Server(
        LLM_MODELS=json.dumps(models),
        LLM_N_CTX="512",
        LLM_N_THREADS="1",
        LLM_MAX_TOKENS_LIMIT="8",
        LLM_MAX_GENERATION_SECONDS="2",
        LLM_MAX_QUEUE="64",
    ).wait_ready(answers=4)
    yield server
    log = server.output()
    server.stop()
    assert "Traceback" not in log, log


@pytest.fixture(scope="module")
def api_schema(fuzz_server: Server) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(fuzz_server.url + "/openapi.json")


OPERATIONS = [
    "POST /v1/chat/completions",
    "POST /v1/completions",
    "POST /v1/responses",
    "POST /v1/responses/input_tokens",
    "POST /v1/messages",
    "POST /v1/messages/count_tokens",
    "GET /v1/models",
    "GET /v1/models/{model_id}",
    "GET /health",
    "GET /health/ready",
    "GET /health/workers",
    "POST /v1/embeddings",
    "POST /tokenize",
    "POST /detokenize",
    "GET /tokenizer_info",
    "POST /v1/chat/completions/input_tokens",
]
STREAMING = {"POST /v1/chat/completions", "POST /v1/completions", "POST /v1/responses", "POST /v1/messages"}


def test_the_document_has_exactly_these_operations(api_schema: schemathesis.BaseSchema) -> None:
    assert sorted(result.ok().label for result in api_schema.get_all_operations()) == sorted(OPERATIONS)


# Completions in both stream modes with valid and invalid bodies; the GETs have no body.
CASES = [
    pytest.param(label, stream, mode, id=f"{label}-{'event-stream' if stream else 'json'}-{mode.value}")
    for label in OPERATIONS
    for stream in ((False, True) if label in STREAMING else (False,))
    for mode in (
        (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
        if label.startswith("POST")
        else (GenerationMode.POSITIVE,)
    )
]


@pytest.mark.parametrize(("label", "stream", "mode"), CASES)
def test_operation_conforms(
    api_schema: schemathesis.BaseSchema, label: str, stream: bool, mode: GenerationMode
) -> None:
    operation = api_schema.find_operation_by_label(label)

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=50,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        database=None,
        derandomize=True,  # the same examples every run: CI is a gate, not a lottery
    )
    def check(case: schemathesis.Case) -> None:
        if isinstance(case.body, dict) and label in STREAMING:
            case.body["stream"] = stream  # both stream modes, whatever else was generated
        case.call_and_validate(checks=CHECKS)

    check()
