"""The image, built with podman as `make image` builds it, run as a pod runs it."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator

import pytest

from tests.integration.conftest import assert_clean
from tests.support import containers
from tests.support.clients import openai_client
from tests.support.rawhttp import RawStream, fetch, finish_reason
from tests.support.waits import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(containers.unavailable() is not None, reason=str(containers.unavailable())),
    pytest.mark.timeout(900),  # the first test builds the image: a Debian base, then the two stages
]


@pytest.fixture(scope="module")
def image() -> str:
    return containers.built_image()


@pytest.fixture
def container(image: str) -> Iterator[containers.Container]:
    started = containers.Container(image, LLM_WORKERS="2", LLM_N_THREADS="1").wait_ready()
    yield started
    log = started.output()
    started.stop()
    assert_clean(log)


def test_runs_as_a_non_root_user_under_tini_with_a_read_only_root(container: containers.Container) -> None:
    assert container.execute("id", "-u").strip() == "10001"
    assert container.execute("cat", "/proc/1/comm").strip() == "tini"
    with pytest.raises(subprocess.CalledProcessError):
        container.execute("touch", "/srv/llm/written")
    health = container.podman("healthcheck", "run", container.name)
    assert health.returncode == 0, health.stderr


def test_a_streamed_chat_completion_through_the_container(container: containers.Container) -> None:
    with openai_client(container) as client:
        stream = client.chat.completions.create(
            model="SmolLM2-135M-Instruct.Q4_1",
            messages=[{"role": "user", "content": "Say hello."}],
            max_tokens=12,
            stream=True,
        )
        chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")


def test_sigterm_drains_a_running_stream_and_exits_0(container: containers.Container) -> None:
    stream = RawStream(
        container.port, {"prompt": "Once", "max_tokens": 200, "ignore_eos": True, "stream": True}
    )
    stream.started()
    stopping = threading.Thread(target=container.podman, args=("stop", "--time", "60", container.name))
    stopping.start()
    wait_until(lambda: fetch(container.port, "GET", "/health/ready").status == 503, 5, "not ready")
    assert fetch(container.port, "GET", "/health").status == 200
    chunks = stream.rest()
    assert chunks[-1] == b"data: [DONE]\n\n" and finish_reason(chunks) == "length"
    stopping.join(timeout=60)
    assert container.exit_code() == 0
    assert "drained: no request is generating" in container.output()


def test_a_bad_setting_stops_the_container_with_one_line(image: str) -> None:
    bad = containers.Container(image, LLM_N_CTX="lots")
    try:
        assert bad.exit_code() == 2
        lines = [line for line in bad.output().splitlines() if line.strip()]
        assert lines == ["configuration error: LLM_N_CTX='lots': must be an integer >= 1"], lines
    finally:
        bad.stop()
