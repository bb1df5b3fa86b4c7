"""Start the real gunicorn, with gevent workers and the real model, on a free loopback port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
GUNICORN = Path(sys.executable).with_name("gunicorn")


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """One gunicorn process tree; stopped by `stop()` (SIGTERM, then SIGKILL)."""

    def __init__(self, **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "LLM_BIND": f"127.0.0.1:{self.port}", **env}
        self.log = tempfile.NamedTemporaryFile("w+", prefix="gunicorn-", suffix=".log")
        self.process = subprocess.Popen(
            [str(GUNICORN), "-c", "gunicorn.conf.py", "wsgi:app"],
            cwd=ROOT,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 60.0) -> Server:
        """Block until every worker answers /health/ready with 200."""
        workers = int(self.env.get("LLM_WORKERS", "1"))
        deadline = time.monotonic() + timeout
        ready = 0
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited with {self.process.returncode}:\n{self.output()}")
            try:
                # Fresh connections, so the kernel spreads the probes over the workers.
                response = httpx.get(self.url + "/health/ready", timeout=2)
                ready = ready + 1 if response.status_code == 200 else 0
            except httpx.HTTPError:
                ready = 0
            if ready >= 3 * workers:
                return self
            time.sleep(0.1)
        raise RuntimeError(f"gunicorn not ready after {timeout}s:\n{self.output()}")

    def output(self) -> str:
        """Everything gunicorn has logged so far."""
        self.log.flush()
        return Path(self.log.name).read_text()

    def stop(self) -> None:
        """Stop the whole process group and wait for it."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=5)
        self.log.close()
