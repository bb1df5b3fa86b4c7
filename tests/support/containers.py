"""The server's image, built with podman and run as a pod runs it: read-only root, /tmp a tmpfs.

Run as root with what these machines need (runc, the host's network, rlimits the
sandbox allows); `unavailable()` says why podman cannot run here, for a skip.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import time
from functools import cache

import httpx

from harness.servers import ROOT, free_port

IMAGE = "localhost/llm-server:test"
RUN_FLAGS = [
    "--runtime", "runc",
    "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=32768:32768",
    "--network", "host",
    "--read-only", "--tmpfs", "/tmp",  # as the Deployment's securityContext and its emptyDir
]  # fmt: skip


@cache
def unavailable() -> str | None:
    """Why podman cannot build and run the image here, or None if it can."""
    if shutil.which("podman") is None:
        return "podman is not installed (make test installs it with .ci/system-packages as root)"
    probe = subprocess.run(["podman", "info"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"podman cannot run here: {(probe.stderr.strip().splitlines() or ['?'])[-1]}"
    return None


@cache
def built_image() -> str:
    """`make image`, as a user builds it (the base made from Debian's packages, no registry).

    One build at a time on the machine: pytest-xdist's processes each ask for the image, and
    `make image` empties and refills build/wheelhouse, which another build may be copying.
    """
    lock = ROOT / "build" / ".image.lock"
    lock.parent.mkdir(exist_ok=True)
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file closes
        built = subprocess.run(
            ["make", "-s", "image", f"IMAGE={IMAGE}"], cwd=ROOT, capture_output=True, text=True
        )
    assert built.returncode == 0, f"make image failed:\n{built.stdout[-3000:]}\n{built.stderr[-3000:]}"
    return IMAGE


class Container:
    """One container of the image on a loopback port, with `LLM_*` settings in `env`."""

    def __init__(self, image: str, **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.name = f"llm-test-{self.port}"
        self.workers = int(env.get("LLM_WORKERS", "1"))
        settings = [f"--env={k}={v}" for k, v in {"LLM_BIND": f"127.0.0.1:{self.port}", **env}.items()]
        command = ["podman", "run", "--detach", "--name", self.name, *RUN_FLAGS, *settings, image]
        subprocess.run(command, check=True, capture_output=True)

    def wait_ready(self, timeout: float = 120) -> Container:
        """Until /health/ready has answered 200 three times per worker in a row, on fresh connections."""
        deadline, ready, answers = time.monotonic() + timeout, 0, 3 * self.workers
        while ready < answers:
            assert time.monotonic() < deadline, f"not ready in {timeout}s:\n{self.output()}"
            assert self.running(), f"the container ended:\n{self.output()}"
            try:
                ready = (
                    ready + 1 if httpx.get(self.url + "/health/ready", timeout=5).status_code == 200 else 0
                )
            except httpx.TransportError:
                ready = 0
            time.sleep(0.1)
        return self

    def running(self) -> bool:
        state = self.podman("inspect", "--format", "{{.State.Running}}", self.name)
        return state.stdout.strip() == "true"

    def terminate(self) -> None:
        """SIGTERM to PID 1, as the kubelet (and `podman stop`) send it."""
        self.podman("kill", "--signal", "TERM", self.name, check=True)

    def exit_code(self, timeout: float = 60) -> int:
        """Wait for the container to end; its exit code."""
        waited = subprocess.run(
            ["podman", "wait", self.name], capture_output=True, text=True, timeout=timeout
        )
        return int(waited.stdout.strip())

    def execute(self, *command: str) -> str:
        return self.podman("exec", self.name, *command, check=True).stdout

    def output(self) -> str:
        """What the container wrote (gunicorn logs to stderr), without podman's own notices."""
        logs = self.podman("logs", self.name)
        lines = (logs.stdout + logs.stderr).splitlines()
        return "\n".join(line for line in lines if not line.startswith('time="'))

    def stop(self) -> None:
        self.podman("rm", "--force", "--time", "0", self.name)

    @staticmethod
    def podman(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["podman", *args], capture_output=True, text=True, check=check)


if __name__ == "__main__":  # `make test-image`: the image built before the tests that run it
    reason = unavailable()
    print(f"no image: {reason}" if reason else f"built {built_image()}")
