"""The deploy folder as shipped: nginx and Prometheus accept it, including the files it includes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from harness.servers import DEPLOY


def test_nginx_accepts_the_shipped_folder(tmp_path: Path) -> None:
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    conf = DEPLOY / "nginx" / "nginx.conf"
    # -t reads nginx.conf and the backends.conf and frontend.conf it includes from its folder.
    globals_ = f"pid {tmp_path}/nginx.pid; error_log {tmp_path}/error.log;"
    checked = subprocess.run(
        [binary, "-t", "-p", str(tmp_path), "-c", str(conf), "-g", globals_],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stderr
    assert "syntax is ok" in checked.stderr and "test is successful" in checked.stderr


def test_prometheus_accepts_the_shipped_folder() -> None:
    binary = shutil.which("promtool") or "/usr/bin/promtool"
    config = DEPLOY / "prometheus" / "prometheus.yml"
    checked = subprocess.run(
        [binary, "check", "config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout + checked.stderr
    # The targets it names: promtool checks the file_sd file too when asked for it directly.
    targets = subprocess.run(
        [binary, "check", "service-discovery", "--timeout=3s", str(config), "llm-server"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=config.parent,
    )
    assert "127.0.0.1:8000" in targets.stdout, targets.stdout + targets.stderr
