"""`make fuzz`: schemathesis over every operation, 1,000 cases per operation, stream mode and kind of
body (valid or not), new ones each run; no server error, every answer as the document says.

Outside `make test` (marked `fuzz`): it sends some 30,000 requests. Each run prints a table
of the cases sent and the statuses answered; `FUZZ_SEED` repeats a run's cases, and
`FUZZ_EXAMPLES` sets fewer cases for a quick look.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import schemathesis
from schemathesis import GenerationMode

from harness.servers import Server
from tests.support.fuzzing import Tally, fuzz, fuzz_server, run_id, runs

pytestmark = pytest.mark.fuzz
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "1000"))  # fewer for a quick look
TALLIES: dict[str, Tally] = {}


@pytest.fixture(scope="module")
def api_schema() -> Iterator[schemathesis.BaseSchema]:
    server: Server = fuzz_server()
    try:
        yield schemathesis.openapi.from_url(server.url + "/openapi.json")
    finally:
        log = server.output()
        server.stop()
        print_summary()
    assert "Traceback" not in log, log


def print_summary() -> None:
    """What each run sent and got, on the terminal (`-s`) for the record."""
    print(f"\n{'operation, stream mode, bodies':<62} {'cases':>6}  statuses")
    for name, tally in TALLIES.items():
        statuses = ", ".join(f"{status}: {count}" for status, count in sorted(tally.statuses.items()))
        print(f"{name:<62} {tally.cases:>6}  {statuses}")
    server_errors = sum(n for t in TALLIES.values() for status, n in t.statuses.items() if status >= 500)
    cases = sum(t.cases for t in TALLIES.values())
    print(f"{len(TALLIES)} runs, {cases} cases, {server_errors} server errors")


@pytest.mark.parametrize(("label", "stream", "mode"), [pytest.param(*run, id=run_id(*run)) for run in runs()])
def test_operation_conforms(
    api_schema: schemathesis.BaseSchema, label: str, stream: bool, mode: GenerationMode
) -> None:
    tally = TALLIES[run_id(label, stream, mode)] = Tally()
    fuzz(api_schema, label, stream, mode, examples=EXAMPLES, derandomize=False, tally=tally)
    assert not any(status >= 500 for status in tally.statuses), tally.statuses
