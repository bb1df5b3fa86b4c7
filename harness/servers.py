"""Real processes on loopback for the tests (and the benchmarks): ours under gunicorn, nginx, Prometheus.

The deploy files are used as they are: each test host's own part (ports, targets) goes
in the files they include, written beside a byte-for-byte copy.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
GUNICORN = Path(sys.executable).with_name("gunicorn")
DEPLOY = ROOT / "deploy"


def free_port() -> int:
    """A loopback TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Service:
    """A process group on a loopback port, its output kept in a log; stopped with SIGTERM, then SIGKILL."""

    def __init__(
        self, command: list[str], port: int, env: dict[str, str] | None = None, cwd: Path = ROOT
    ) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.env = {**os.environ, **(env or {})}
        self.log = tempfile.NamedTemporaryFile("w+b", prefix="service-", suffix=".log")
        try:
            self.process = subprocess.Popen(
                command,
                cwd=cwd,
                env=self.env,
                stdout=self.log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError:  # no such program: the log is closed now, not warned of in a later test
            self.log.close()
            raise

    def wait_ready(self, path: str, timeout: float = 120, answers: int = 1) -> Service:
        """Until `path` has answered 200 `answers` times in a row (or the process dies)."""
        deadline = time.monotonic() + timeout
        ready = 0
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.process.args!r} exited with {self.process.returncode}:\n{self.output()}"
                )
            try:
                # Fresh connections, so the kernel spreads the probes over gunicorn's workers.
                ready = ready + 1 if httpx.get(self.url + path, timeout=2).status_code == 200 else 0
            except httpx.HTTPError:
                ready = 0
            if ready >= answers:
                return self
            time.sleep(0.1)
        raise RuntimeError(f"{self.url + path} did not answer within {timeout}s:\n{self.output()}")

    def output(self) -> str:
        """Everything the process has written so far."""
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")

    def pids(self) -> list[int]:
        """The main process and its children (gunicorn's workers)."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        return [self.process.pid, *map(int, children)]

    def stop(self, wait: bool = True) -> None:
        """Stop the whole process group: SIGTERM, then SIGKILL if it is still there after 20 s.

        `wait=False` returns at once and leaves the waiting to a thread: a fixture that has read
        the log has no more use for the process, and its drain (a second or so) need not hold up
        the next test.
        """
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            if not wait:
                threading.Thread(target=self._reap, name=f"reap-{self.process.pid}", daemon=True).start()
                return
        self._reap()

    def _reap(self) -> None:
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=5)
        self.log.close()


def share_of_cores(env: dict[str, str]) -> str:
    """The threads a server's worker gets unless its settings say: the server's own default (the
    cores divided by its workers), divided again by the test processes running side by side.

    llama.cpp's threads spin at every barrier of a step: two servers of two threads each on two
    cores spend much of their time waiting for a thread that is not running (pytest-xdist's
    processes each start their own servers, which know nothing of each other).
    """
    runners = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    workers = int(env.get("LLM_WORKERS") or "1")
    return str(max(1, len(os.sched_getaffinity(0)) // runners // workers))


class Server(Service):
    """This server under the real gunicorn, started as users start it, with `LLM_*` settings in `env`."""

    def __init__(
        self,
        args: tuple[str, ...] = (),
        /,
        root: Path | str = ROOT,
        gunicorn: Path | str = GUNICORN,
        **env: str,
    ) -> None:
        """`root`: the checkout to run (another one's code beside this one's, for a benchmark);
        `gunicorn`: another venv's (another llama.cpp build's, for the GPU tests)."""
        port = free_port()
        # Each server its own store unless a test shares one (as two instances on a host would).
        self.own_data = None if "LLM_DATA_DIR" in env else tempfile.mkdtemp(prefix="test-data-")
        data = {"LLM_DATA_DIR": self.own_data} if self.own_data else {}
        threads = {"LLM_N_THREADS": share_of_cores(env)}
        super().__init__(
            [str(gunicorn), "-c", "gunicorn.conf.py", *args, "wsgi:app"],
            port,
            {"LLM_BIND": f"127.0.0.1:{port}", **data, **threads, **env},
            cwd=Path(root),
        )
        if self.own_data:  # kept while this process lives: a test may start a server on it again
            atexit.register(shutil.rmtree, self.own_data, ignore_errors=True)

    def wait_ready(self, path: str = "/health/ready", timeout: float = 60, answers: int = 0) -> Server:
        """Until every worker has loaded its model (several ready answers in a row, on fresh connections)."""
        workers = int(self.env.get("LLM_WORKERS", "1"))
        super().wait_ready(path, timeout, answers or 3 * workers)
        return self


@contextmanager
def serving_models(models: list[dict[str, Any]], answers: int = 0, **env: str) -> Iterator[Server]:
    """A server for `models` (LLM_MODELS), ready on every worker; stopped after, its log free of errors."""
    server = Server(LLM_MODELS=json.dumps(models), **{"LLM_N_THREADS": "1", **env}).wait_ready(
        answers=answers
    )
    try:
        yield server
    finally:
        log = server.output()
        server.stop(wait=False)
    assert "Traceback" not in log, log


def nginx(backend_ports: list[int]) -> Service:
    """nginx with deploy/nginx/nginx.conf as it is, in front of `backend_ports`, on a free port.

    The file includes this host's backends.conf and frontend.conf from its own folder;
    those are written here, beside a copy of nginx.conf.
    """
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    port = free_port()
    prefix = Path(tempfile.mkdtemp(prefix="test-nginx-"))
    shutil.copy(DEPLOY / "nginx" / "nginx.conf", prefix / "nginx.conf")
    (prefix / "backends.conf").write_text("".join(f"server 127.0.0.1:{p};\n" for p in backend_ports))
    (prefix / "frontend.conf").write_text(f"listen 127.0.0.1:{port};\naccess_log off;\n")
    command = [
        binary,
        "-p",
        str(prefix),
        "-c",
        str(prefix / "nginx.conf"),
        "-g",
        f"daemon off; pid {prefix}/nginx.pid; error_log {prefix}/error.log;",
    ]
    return Service(command, port).wait_ready("/health")


def prometheus(targets: list[str], interval: str = "1s") -> Service:
    """Debian's Prometheus with deploy/prometheus/prometheus.yml as it is, scraping `targets` (host:port)
    every `interval`.

    The file reads its targets from targets.yml in its own folder; that one is written
    here, beside a copy of prometheus.yml, with this test's interval as the targets' own
    (Prometheus' `__scrape_interval__` label), so a test need not wait the shipped 5 s.
    """
    binary = shutil.which("prometheus") or "/usr/bin/prometheus"
    port = free_port()
    prefix = Path(tempfile.mkdtemp(prefix="test-prometheus-"))
    shutil.copy(DEPLOY / "prometheus" / "prometheus.yml", prefix / "prometheus.yml")
    labels = {"__scrape_interval__": interval, "__scrape_timeout__": interval}
    (prefix / "targets.yml").write_text(json.dumps([{"targets": targets, "labels": labels}]))
    command = [
        binary,
        f"--config.file={prefix / 'prometheus.yml'}",
        f"--storage.tsdb.path={prefix / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    return Service(command, port, cwd=prefix).wait_ready("/-/ready")
