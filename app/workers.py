"""What gunicorn's workers share, as one object: made by the master before fork, inherited by each worker.

The master builds a `SharedState` (the peer table, the status board, the per-key counts,
the prefix board, the drain flag, the line of requests waiting for on-demand models: all
memory shared through fork) once, and keeps it across reloads. After fork, each worker
gets a `WorkerState` (the shared state and its own place in the table); its app keeps
that in `app.extensions["workers"]`, where every view reads it (and hands the serving
layer the pieces it needs). `inherited` is the one channel from the fork to the app
factory, read once by `create_app`.

It sits above `serving` and `telemetry` (it holds a piece of each), below `api`.
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import Flask, current_app

from app.serving.drain import DrainFlag
from app.serving.key_limits import KeyLimits
from app.serving.peers import SEATS, PeerTable, Worker
from app.serving.prefix_board import PrefixBoard
from app.serving.waiting_line import WaitingLine
from app.telemetry.worker_board import WorkerBoard


@dataclass(frozen=True)
class SharedState:
    """The master's shared memory, one region per concern, each with a row per worker seat."""

    table: PeerTable  # each worker's load, model and readiness; its relay socket
    board: WorkerBoard  # the status page's figures
    limits: KeyLimits  # per-key limits held across workers
    prefixes: PrefixBoard  # which prompt prefixes each worker caches, for routing
    drain: DrainFlag  # raised by SIGTERM: every worker turns not-ready
    line: WaitingLine  # requests waiting for an on-demand model, in arrival order

    @classmethod
    def create(cls) -> SharedState:
        return cls(
            PeerTable(),
            WorkerBoard(SEATS),
            KeyLimits(SEATS),
            PrefixBoard(SEATS),
            DrainFlag(),
            WaitingLine(SEATS),
        )

    def forget(self, seat: int) -> None:
        """Master, when the worker in `seat` has exited: its seat free, its rows and counts cleared."""
        self.table.release(seat)
        self.board.clear(seat)
        self.prefixes.clear(seat)
        self.line.clear(seat)
        self.limits.clear_worker(seat)  # a killed worker's generations are over


@dataclass(frozen=True)
class WorkerState:
    """What one worker process has of the shared state: all of it, and its own place in the table."""

    shared: SharedState
    me: Worker

    @property
    def draining(self) -> bool:
        """Whether this worker's instance has been told to stop."""
        return self.shared.drain.up


# Set in each worker by gunicorn.conf.py's post_fork; None outside gunicorn (one process).
inherited: WorkerState | None = None


def init_app(app: Flask) -> None:
    """Keep this worker's state where the app's code reads it (None outside gunicorn)."""
    app.extensions["workers"] = inherited


def of(app: Flask) -> WorkerState | None:
    """The state of the worker `app` runs in (None outside gunicorn)."""
    state: WorkerState | None = app.extensions.get("workers")
    return state


def current() -> WorkerState | None:
    """This worker's state, from the current app (None outside gunicorn)."""
    state: WorkerState | None = current_app.extensions.get("workers")
    return state


def this_worker() -> Worker | None:
    """This worker's place in the peer table (None outside gunicorn)."""
    state = current()
    return None if state is None else state.me
