"""The deploy folder as shipped: nginx, Prometheus and systemd accept it, including the files it includes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from app.settings.config import Config
from harness.servers import DEPLOY

pytestmark = pytest.mark.external


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


def verify_unit(unit: Path, root: Path) -> subprocess.CompletedProcess[str]:
    """systemd-analyze's check of `unit`, its /opt/llm-server paths moved under `root` (where a
    stand-in gunicorn lies: systemd checks that ExecStart is an executable)."""
    binary = root / ".venv" / "bin" / "gunicorn"
    binary.parent.mkdir(parents=True, exist_ok=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    moved = root / unit.name
    moved.write_text(unit.read_text().replace("/opt/llm-server", str(root)))
    command = [shutil.which("systemd-analyze") or "/usr/bin/systemd-analyze", "verify", str(moved)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def test_systemd_accepts_the_shipped_unit(tmp_path: Path) -> None:
    unit = DEPLOY / "systemd" / "llm-server.service"
    checked = verify_unit(unit, tmp_path)
    assert checked.returncode == 0 and not checked.stderr.strip(), checked.stderr
    text = unit.read_text()
    # The drain needs SIGTERM at the master alone, and longer than LLM_GRACEFUL_TIMEOUT (its default).
    assert "KillMode=mixed" in text and "ExecReload=/bin/kill -HUP $MAINPID" in text
    assert int(text.split("TimeoutStopSec=")[1].split()[0]) > Config.from_env({}).graceful_timeout


def test_systemd_analyze_reports_a_mistake_in_a_unit(tmp_path: Path) -> None:
    broken = tmp_path / "broken" / "llm-server.service"
    broken.parent.mkdir()
    shipped = (DEPLOY / "systemd" / "llm-server.service").read_text()
    broken.write_text(shipped.replace("KillMode=", "KillMod="))
    checked = verify_unit(broken, tmp_path)
    assert "Unknown key" in checked.stderr and "KillMod" in checked.stderr, checked.stderr
