"""Pods on loopback for the scale-out tests: containers of the image where podman runs, else gunicorn."""

from __future__ import annotations

import os
import signal

from harness.servers import Server
from tests.support import containers


class ProcessPod:
    """This server under gunicorn, handled as a pod: SIGTERM to its main process, its exit code."""

    def __init__(self, **env: str) -> None:
        self.server = Server(**env)
        self.url, self.port = self.server.url, self.server.port

    def wait_ready(self) -> ProcessPod:
        self.server.wait_ready()
        return self

    def terminate(self) -> None:
        os.kill(self.server.process.pid, signal.SIGTERM)

    def exit_code(self, timeout: float = 60) -> int:
        return self.server.process.wait(timeout=timeout)

    def output(self) -> str:
        return self.server.output()

    def stop(self) -> None:
        self.server.stop()


def start_pod(**env: str) -> containers.Container | ProcessPod:
    """A pod with `LLM_*` settings `env`: a container of the image if podman can run, else a process."""
    if containers.unavailable() is None:
        return containers.Container(containers.built_image(), **env)
    return ProcessPod(**env)  # where podman cannot run: the same server, as a process
