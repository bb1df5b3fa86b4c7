"""Which gunicorn worker holds a client's connection, read from /proc (Linux)."""

from __future__ import annotations

import os
import socket
from functools import partial
from http.client import HTTPConnection
from pathlib import Path

from tests.support.waits import wait_until


def worker_pids(master_pid: int) -> list[int]:
    """The master's live child processes."""
    children = Path(f"/proc/{master_pid}/task/{master_pid}/children").read_text().split()
    return [int(pid) for pid in children]


def _socket_inode(client_port: int, server_port: int) -> str | None:
    """The inode of the server side of the loopback connection from `client_port` to `server_port`.

    Both ports, and a live socket: a closed connection of an earlier test that used the same
    client port lingers in the table (TIME_WAIT, inode 0) and must not be taken for this one.
    """
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].split(":")[1], 16)
            remote_port = int(fields[2].split(":")[1], 16)
            # The server's end: it is on the server's port, its peer our client port.
            if (local_port, remote_port) == (server_port, client_port) and fields[9] != "0":
                return fields[9]
    return None


def worker_holding(master_pid: int, client: socket.socket) -> int | None:
    """The pid of the worker that accepted `client`'s connection, if one has."""
    inode = _socket_inode(client.getsockname()[1], client.getpeername()[1])
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    for pid in worker_pids(master_pid):
        fd_dir = Path(f"/proc/{pid}/fd")
        for fd in os.listdir(fd_dir):
            try:
                if os.readlink(fd_dir / fd) == target:
                    return pid
            except OSError:
                continue
    return None


def connection_to_each_worker(
    host: str, port: int, master_pid: int, workers: int
) -> dict[int, HTTPConnection]:
    """One kept-alive HTTP connection to each of `workers` workers, by the pid that accepted it.

    The kernel hands a new connection to whichever worker accepts first, so connections
    are opened until every worker holds one; the spare ones are closed.
    """
    held: dict[int, HTTPConnection] = {}
    for _ in range(200):
        connection = HTTPConnection(host, port, timeout=60)
        connection.connect()
        accepted = connection.sock
        assert accepted is not None
        pid = wait_until(partial(worker_holding, master_pid, accepted), what="an accepted connection")
        assert pid is not None
        if pid in held:
            connection.close()
        else:
            held[pid] = connection
        if len(held) == workers:
            return held
    raise AssertionError(f"fewer than {workers} workers accepted 200 connections")


def established_to(port: int) -> int:
    """How many open loopback connections lead to `port` (their client ends, whoever holds them)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[2].split(":")[1], 16) == port and fields[3] == "01":  # 01: ESTABLISHED
                count += 1
    return count
