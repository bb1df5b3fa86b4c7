"""The servers a benchmark run starts on loopback: ours (gunicorn), nginx in front, and the peer."""

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
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
PEER_VENV = ROOT / "bench" / ".peer-venv"


def free_port() -> int:
    """A loopback TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(url: str, process: subprocess.Popen[bytes], timeout: float = 120) -> None:
    """Until `url` answers 200 (or the process dies)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args} exited with {process.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout}s")


class Service:
    """A process group on a loopback port, stopped with SIGTERM (then SIGKILL)."""

    def __init__(
        self,
        command: list[str],
        port: int,
        ready_path: str,
        env: dict[str, str] | None = None,
        cwd: Path = ROOT,
    ) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            command,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for(self.url + ready_path, self.process)

    def pids(self) -> list[int]:
        """The main process and its children (gunicorn's workers)."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        return [self.process.pid, *map(int, children)]

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()


def ours(workers: int, threads: int, n_ctx: int, **extra: str) -> Service:
    """This server under gunicorn, with the settings the comparison uses (plus `extra` LLM_* ones)."""
    port = free_port()
    env = {
        **extra,
        "LLM_BIND": f"127.0.0.1:{port}",
        "LLM_WORKERS": str(workers),
        "LLM_N_THREADS": str(threads),
        "LLM_N_CTX": str(n_ctx),
        "LLM_MAX_QUEUE": "64",
        "LLM_QUEUE_TIMEOUT": "600",
    }
    gunicorn = Path(sys.executable).with_name("gunicorn")
    return Service([str(gunicorn), "-c", "gunicorn.conf.py", "wsgi:app"], port, "/health/ready", env)


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
    return Service(command, port, "/health")


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
    return Service(command, port, "/v1/models", cwd=PEER_VENV)
