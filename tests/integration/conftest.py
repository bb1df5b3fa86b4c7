"""Fixtures that run the real server: gunicorn, gevent workers, the default model."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest

from harness.servers import Server, Service
from tests.support import module_time
from tests.support.clients import openai_client
from tests.support.postgres import postgres_server


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    """One shared server with a single worker and a short keep-alive interval."""
    yield from shared_server()


@pytest.fixture(scope="session")
def reproducible_server() -> Iterator[Server]:
    """A shared server as `server`, in the reproducible mode (LLM_BATCH_INVARIANT=1): for the modules
    that compare its answers with llama-server's on the same kernels, bit for bit."""
    yield from shared_server(LLM_BATCH_INVARIANT="1")


def shared_server(**env: str) -> Iterator[Server]:
    """A session's shared server (one worker, a short keep-alive interval, `env`), its log checked after."""
    instance = Server(LLM_WORKERS="1", LLM_SSE_KEEPALIVE="1", **env).wait_ready()
    yield instance
    log = instance.output()
    instance.stop(wait=False)
    assert_clean(log)


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[Service]:
    """The test MCP server (harness/mcp_server.py) over streamable HTTP on loopback, one per module."""
    from harness import mcp_server as tools  # the mcp SDK, imported by the modules that use it only

    service = tools.started()
    yield service
    service.stop(wait=False)


@pytest.fixture
def client(server: Server) -> Iterator[openai.OpenAI]:
    """The openai SDK on the shared server."""
    with openai_client(server) as sdk:
        yield sdk


@pytest.fixture
def start_server() -> Iterator[Callable[..., Server]]:
    """Start servers with custom settings; all are stopped after the test."""
    started: list[Server] = []

    def start(**env: str) -> Server:
        instance = Server(**env)
        started.append(instance)
        return instance.wait_ready()

    yield start
    logs = [instance.output() for instance in started]
    for instance in started:
        instance.stop(wait=False)
    for log in logs:
        assert_clean(log)


def assert_clean(log: str) -> None:
    """Nothing a client did may show up as an error: hang-ups are logged as cancellations.

    A worker killed on purpose by a test is the one error gunicorn may report.
    """
    lines = [line for line in log.splitlines() if "was sent SIGKILL" not in line]
    assert not [line for line in lines if "Traceback" in line or "[ERROR]" in line], log


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's headless Chromium driven by Playwright (which cannot download a browser here).

    Per module, not per session: Playwright's sync API holds an asyncio loop in this thread
    while it runs, and the tests of other modules start loops of their own (asyncio.run).
    """
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail("chromium is needed (.ci/run installs Debian's chromium)")
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=executable)
        yield instance
        instance.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh tab (its own session storage); a script error on the page fails the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    tab = context.new_page()
    tab.set_default_timeout(60_000)
    # expect()'s assertions poll until they hold, within their own bound (5 s unless set): a
    # page waiting on a busy machine's model took longer once, and the suite failed by timing.
    from playwright.sync_api import expect

    expect.set_options(timeout=60_000)
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    yield tab
    context.close()
    assert not errors, errors


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """After the ten slowest tests, the ten slowest modules: where a tier's time goes."""
    module_time.summarise(terminalreporter)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The store's tests on PostgreSQL drive a real PostgreSQL: they belong to the external tier."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("store_backend") == "postgresql":
            item.add_marker(pytest.mark.external)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store_backend(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """The settings that point a server at a fresh store of each kind (each module its own)."""
    if request.param == "sqlite":
        yield {}  # the default: a SQLite file in the server's LLM_DATA_DIR
    else:
        with postgres_server() as url:
            yield {"LLM_STORE_URL": url}


@pytest.fixture(scope="module")
def store_server(store_backend: dict[str, str]) -> Iterator[Server]:
    """Two workers sharing the store (every worker writes), two keys (each sees only its own data)."""
    instance = Server(
        LLM_WORKERS="2",
        LLM_N_THREADS="1",
        LLM_API_KEYS=STORE_KEYS,
        LLM_DEFAULT_MAX_TOKENS="12",
        LLM_MAX_FILE_BYTES=str(4 * 1024 * 1024),
        **store_backend,
    ).wait_ready()
    yield instance
    log = instance.output()
    instance.stop(wait=False)
    assert_clean(log)
    assert "database is locked" not in log, log


STORE_KEYS = "alice:key-alice,bob:key-bob"


_store_clients: list[openai.OpenAI] = []


def store_sdk(server: Server, key: str = "key-alice") -> openai.OpenAI:
    """The openai SDK as one of the store server's keys (closed after the test that made it)."""
    client = openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)
    _store_clients.append(client)
    return client


@pytest.fixture(autouse=True)
def _close_store_clients() -> Iterator[None]:
    """A client left open warns of its socket when collected, in whichever test runs then."""
    yield
    while _store_clients:
        _store_clients.pop().close()
