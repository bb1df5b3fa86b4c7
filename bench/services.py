"""Real server processes on loopback, for benchmarks and tests: ours under gunicorn, nginx, the peers."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
GUNICORN = Path(sys.executable).with_name("gunicorn")
PEER_VENV = ROOT / "bench" / ".peer-venv"


def free_port() -> int:
    """A loopback TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Service:
    """A process group on a loopback port, its output kept in a log; stopped with SIGTERM, then SIGKILL."""

    def __init__(
        self, command: list[str], port: int, env: dict[str, str] | None = None, cwd: Path = ROOT
    ) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.env = {**os.environ, **(env or {})}
        self.log = tempfile.NamedTemporaryFile("w+b", prefix="service-", suffix=".log")
        self.process = subprocess.Popen(
            command,
            cwd=cwd,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, path: str, timeout: float = 120, answers: int = 1) -> Service:
        """Until `path` has answered 200 `answers` times in a row (or the process dies)."""
        deadline = time.monotonic() + timeout
        ready = 0
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.process.args} exited with {self.process.returncode}:\n{self.output()}"
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

    def stop(self) -> None:
        """Stop the whole process group and wait for it."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=5)
        self.log.close()


class Server(Service):
    """This server under the real gunicorn, started as users start it, with `LLM_*` settings in `env`."""

    def __init__(self, args: tuple[str, ...] = (), **env: str) -> None:
        port = free_port()
        super().__init__(
            [str(GUNICORN), "-c", "gunicorn.conf.py", *args, "wsgi:app"],
            port,
            {"LLM_BIND": f"127.0.0.1:{port}", **env},
        )

    def wait_ready(self, path: str = "/health/ready", timeout: float = 60, answers: int = 0) -> Server:
        """Until every worker has loaded its model (several ready answers in a row, on fresh connections)."""
        workers = int(self.env.get("LLM_WORKERS", "1"))
        super().wait_ready(path, timeout, answers or 3 * workers)
        return self


def ours(workers: int, threads: int, n_ctx: int, **extra: str) -> Server:
    """This server with the settings the comparison uses (plus `extra` LLM_* ones), ready."""
    env = {
        **extra,
        "LLM_WORKERS": str(workers),
        "LLM_N_THREADS": str(threads),
        "LLM_N_CTX": str(n_ctx),
        "LLM_MAX_QUEUE": "64",
        "LLM_QUEUE_TIMEOUT": "600",
    }
    return Server(**env).wait_ready(timeout=120)


def nginx(backend_ports: list[int]) -> Service:
    """nginx with deploy/nginx.conf, its upstream and port rewritten for this run."""
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    port = free_port()
    prefix = Path(tempfile.mkdtemp(prefix="bench-nginx-"))
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    servers = "".join(f"server 127.0.0.1:{p};\n        " for p in backend_ports)
    conf = re.sub(r"(server 127\.0\.0\.1:\d+;\s*)+", servers, conf, count=1)
    conf = conf.replace("listen 127.0.0.1:8080;", f"listen 127.0.0.1:{port};")
    conf = conf.replace("http {", "http {\n    access_log off;", 1)
    (prefix / "nginx.conf").write_text(conf)
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
    """Debian's Prometheus with deploy/prometheus.yml, scraping `targets` (host:port) every `interval`."""
    binary = shutil.which("prometheus") or "/usr/bin/prometheus"
    port = free_port()
    prefix = Path(tempfile.mkdtemp(prefix="bench-prometheus-"))
    conf = (ROOT / "deploy" / "prometheus.yml").read_text()
    conf = re.sub(r"targets: \[.*\]", "targets: " + repr(targets).replace("'", '"'), conf)
    conf = re.sub(r"(scrape|evaluation)_interval: \S+", rf"\1_interval: {interval}", conf)
    (prefix / "prometheus.yml").write_text(conf)
    command = [
        binary,
        f"--config.file={prefix / 'prometheus.yml'}",
        f"--storage.tsdb.path={prefix / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    return Service(command, port, cwd=prefix).wait_ready("/-/ready")


def install_peer() -> Path:
    """llama-cpp-python's bundled server in a virtual environment of its own (pinned)."""
    python = PEER_VENV / "bin" / "python"
    marker = PEER_VENV / ".installed"
    requirements = ROOT / "bench" / "requirements-peer.txt"
    if not marker.exists() or marker.read_text() != requirements.read_text():
        venv.create(PEER_VENV, with_pip=True, clear=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", str(requirements)], check=True)
        marker.write_text(requirements.read_text())
    return python


def peer(model_path: str, threads: int, n_ctx: int) -> Service:
    """llama-cpp-python's server (FastAPI + uvicorn) on the same model and settings."""
    python = install_peer()
    port = free_port()
    command = [
        str(python),
        "-m",
        "llama_cpp.server",
        "--model",
        model_path,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(threads),
    ]
    return Service(command, port, cwd=PEER_VENV).wait_ready("/v1/models")


@contextmanager
def busy_neighbour() -> Iterator[None]:
    """One other process keeping a core busy (a batch job, a load generator) for the block's length."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)  # let it take its share of the cores before measuring
        yield
    finally:
        spinner.kill()
        spinner.wait()
