"""Tracked background work: a stopping worker waits for it, beating its heartbeat, up to a deadline."""

from __future__ import annotations

import threading
import time

from app.serving import detached


def test_wait_returns_when_the_work_ends_and_beats_meanwhile() -> None:
    release = threading.Event()
    detached.start(threading.Thread(target=release.wait, args=(30,), daemon=True))
    assert detached.running() == 1
    beats: list[float] = []

    def tick() -> None:
        beats.append(time.monotonic())
        if len(beats) == 2:
            release.set()  # the work ends while the worker waits for it

    detached.wait(time.monotonic() + 30, tick)
    assert len(beats) >= 2 and detached.running() == 0


def test_wait_gives_up_at_the_deadline() -> None:
    release = threading.Event()
    detached.start(threading.Thread(target=release.wait, args=(30,), daemon=True))
    started = time.monotonic()
    detached.wait(started + 0.3, lambda: None)
    assert detached.running() == 1 and time.monotonic() - started < 5
    release.set()
    detached.wait(time.monotonic() + 10, lambda: None)
    assert detached.running() == 0
