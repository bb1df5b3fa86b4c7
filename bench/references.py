"""What a benchmark compares: ours as set up for it, llama-cpp-python's server, a busy neighbour.

The processes themselves are started by the shared harness (harness/servers.py).
"""

from __future__ import annotations

import subprocess
import sys
import time
import venv
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.servers import ROOT, Server, Service, free_port

PEER_VENV = ROOT / "bench" / ".peer-venv"


def ours(workers: int, threads: int, n_ctx: int, *, root: Path | str = ROOT, **extra: str) -> Server:
    """This server (or the checkout at `root`) with the settings the comparison uses (plus `extra`
    LLM_* ones), ready."""
    env = {
        **extra,
        "LLM_WORKERS": str(workers),
        "LLM_N_THREADS": str(threads),
        "LLM_N_CTX": str(n_ctx),
        "LLM_MAX_QUEUE": "64",
        "LLM_QUEUE_TIMEOUT": "600",
    }
    return Server(root=root, **env).wait_ready(timeout=120)


def install_peer() -> Path:
    """llama-cpp-python's bundled server in a virtual environment of its own (pinned)."""
    python = PEER_VENV / "bin" / "python"
    marker = PEER_VENV / ".installed"
    requirements = ROOT / "bench" / "requirements-peer.txt"
    if not marker.exists() or marker.read_text() != requirements.read_text():
        venv.create(PEER_VENV, with_pip=True, clear=True)
        # llama-cpp-python as ours is built (deploy/llama-cpp/wheel.sh: no AMX kernels, which crash).
        wheels = subprocess.run(
            ["bash", str(ROOT / "deploy" / "llama-cpp" / "wheel.sh"), str(python)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--find-links", wheels, "-r", str(requirements)],
            check=True,
        )
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
