"""A real PostgreSQL server from Debian's packages, on a temporary data directory and a loopback port.

initdb refuses to run as root, so as root (CI) the server runs as Debian's `postgres` user.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.servers import free_port


def _bin(name: str) -> str:
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    if not found:
        raise RuntimeError("PostgreSQL's server is needed (.ci/system-packages installs Debian's postgresql)")
    return str(found[-1])


def _as_server_user(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@contextmanager
def postgres_server() -> Iterator[str]:
    """A running server with a database `llm`; yields its SQLAlchemy URL (password auth, user llm)."""
    data = Path(tempfile.mkdtemp(prefix="test-postgres-"))
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(data, user.pw_uid, user.pw_gid)
    port = free_port()
    password_file = data / "password"
    password_file.write_text("secret-pw\n")
    if os.geteuid() == 0:
        os.chown(password_file, pwd.getpwnam("postgres").pw_uid, -1)
    quiet: dict[str, Any] = {"stdout": subprocess.DEVNULL, "check": True}
    subprocess.run(
        _as_server_user(
            [_bin("initdb"), "-D", str(data / "db"), "-U", "llm", "--auth=scram-sha-256",
             f"--pwfile={password_file}", "-E", "UTF8"]
        ),
        **quiet,
    )  # fmt: skip
    options = f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c max_connections=200"
    subprocess.run(
        _as_server_user(
            [_bin("pg_ctl"), "-D", str(data / "db"), "-o", options, "-l", str(data / "log"), "-w", "start"]
        ),
        **quiet,
    )
    try:
        env = {**os.environ, "PGPASSWORD": "secret-pw"}
        subprocess.run(
            [_bin("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "llm", "llm"], env=env, **quiet
        )
        yield f"postgresql://llm:secret-pw@127.0.0.1:{port}/llm"
    finally:
        subprocess.run(
            _as_server_user([_bin("pg_ctl"), "-D", str(data / "db"), "-m", "immediate", "-w", "stop"]),
            stdout=subprocess.DEVNULL,
            check=False,
        )
        shutil.rmtree(data, ignore_errors=True)
