"""Run nginx with deploy/nginx.conf on loopback, its upstream pointed at test backends."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from tests.integration.server import ROOT, free_port


class Nginx:
    """nginx in the foreground with the repository's configuration, ports rewritten."""

    def __init__(self, backend_ports: list[int]) -> None:
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        assert Path(binary).exists(), "nginx is needed (.ci/run installs Debian's nginx)"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.prefix = Path(tempfile.mkdtemp(prefix="nginx-"))
        conf = (ROOT / "deploy" / "nginx.conf").read_text()
        servers = "".join(f"server 127.0.0.1:{port};\n        " for port in backend_ports)
        conf = re.sub(r"(server 127\.0\.0\.1:\d+;\s*)+", servers, conf, count=1)
        conf = conf.replace("listen 127.0.0.1:8080;", f"listen 127.0.0.1:{self.port};")
        conf = conf.replace("http {", f"http {{\n    access_log {self.prefix}/access.log;", 1)
        (self.prefix / "nginx.conf").write_text(conf)
        self.process = subprocess.Popen(
            [
                binary,
                "-p",
                str(self.prefix),
                "-c",
                str(self.prefix / "nginx.conf"),
                "-g",
                f"daemon off; pid {self.prefix}/nginx.pid; error_log {self.prefix}/error.log;",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(self.url + "/health", timeout=2)
                return
            except httpx.HTTPError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"nginx did not start: {self.process.stderr.read()!r}") from None
                time.sleep(0.1)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)
        self.process.stderr.close()
        shutil.rmtree(self.prefix, ignore_errors=True)
