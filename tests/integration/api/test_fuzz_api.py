"""schemathesis against the live server, from its own OpenAPI document: no 5xx, and every
response (status, headers, body) as the document says."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from schemathesis import GenerationMode

from harness.servers import Server
from tests.support.fuzzing import OPERATIONS, fuzz, fuzz_server, run_id, runs


@pytest.fixture(scope="module")
def server_to_fuzz() -> Iterator[Server]:
    server = fuzz_server()
    yield server
    log = server.output()
    server.stop(wait=False)
    assert "Traceback" not in log, log


@pytest.fixture(scope="module")
def api_schema(server_to_fuzz: Server) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(server_to_fuzz.url + "/openapi.json")


def test_the_document_has_exactly_these_operations(api_schema: schemathesis.BaseSchema) -> None:
    assert sorted(result.ok().label for result in api_schema.get_all_operations()) == sorted(OPERATIONS)


# Completions in both stream modes with valid and invalid bodies; the GETs have no body.
CASES = [pytest.param(*run, id=run_id(*run)) for run in runs()]


@pytest.mark.parametrize(("label", "stream", "mode"), CASES)
def test_operation_conforms(
    api_schema: schemathesis.BaseSchema, label: str, stream: bool, mode: GenerationMode
) -> None:
    fuzz(api_schema, label, stream, mode, examples=30)  # make fuzz runs up to 1,000
