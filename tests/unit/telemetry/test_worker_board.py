"""The worker board: per-worker figures in shared memory, tokens counted over a sliding minute."""

from __future__ import annotations

import os

import gevent

from app.telemetry.worker_board import WINDOW, WorkerBoard, count_greenlets


def test_tokens_add_up_within_the_minute_and_fall_out_after_it() -> None:
    board = WorkerBoard(seats=2)
    board.add_tokens(0, 3, now=1000.2)
    board.add_tokens(0, 4, now=1000.9)  # the same second
    board.add_tokens(0, 5, now=1030.0)
    assert board.read(0, now=1030.5).tokens_last_minute == 12
    assert board.read(0, now=1059.9).tokens_last_minute == 12
    assert board.read(0, now=1060.0).tokens_last_minute == 5  # second 1000 is a minute old
    assert board.read(0, now=1090.0).tokens_last_minute == 0
    assert board.read(0, now=1030.0).tokens_per_second == round(12 / WINDOW, 2)


def test_a_bucket_reused_a_minute_later_starts_over() -> None:
    board = WorkerBoard(seats=1)
    board.add_tokens(0, 7, now=500)
    board.add_tokens(0, 2, now=500 + WINDOW)  # the same bucket, a new second
    assert board.read(0, now=500 + WINDOW).tokens_last_minute == 2


def test_rows_are_separate_and_a_cleared_row_starts_from_nothing() -> None:
    board = WorkerBoard(seats=3)
    board.record_load(1, running=2, waiting=5)
    board.add_tokens(1, 9, now=10)
    assert board.read(2, now=10) == board.read(0, now=10)
    assert (board.read(1, now=10).running, board.read(1, now=10).waiting) == (2, 5)
    board.clear(1)
    assert board.read(1, now=10).tokens_last_minute == 0 and board.read(1, now=10).running == 0


def test_a_forked_worker_writes_where_the_parent_reads() -> None:
    board = WorkerBoard(seats=2)
    pid = os.fork()
    if pid == 0:  # the worker
        board.record_load(1, running=1, waiting=0)
        board.add_tokens(1, 42, now=100)
        os._exit(0)
    os.waitpid(pid, 0)
    assert board.read(1, now=100).tokens_last_minute == 42 and board.read(1, now=100).running == 1


def test_greenlets_are_counted_and_kept_apart_from_the_load() -> None:
    board = WorkerBoard(seats=1)
    before = count_greenlets()
    sleeping = [gevent.spawn(gevent.sleep, 5) for _ in range(3)]
    gevent.sleep(0)  # let them start
    assert count_greenlets() >= before + 3
    board.record_load(0, running=1, waiting=2)
    board.record_greenlets(0, 42)
    board.record_load(0, running=0, waiting=0)
    assert board.read(0).greenlets == 42 and board.read(0).running == 0
    gevent.killall(sleeping)


def test_a_greenlet_count_tells_when_it_was_taken() -> None:
    board = WorkerBoard(seats=2)
    assert board.read(1).greenlets_counted_at == 0  # not counted yet: nobody may take it for a count
    board.record_greenlets(1, 7, now=1234.5)
    board.record_load(1, running=2, waiting=0)
    figures = board.read(1)
    assert (figures.greenlets, figures.greenlets_counted_at, figures.running) == (7, 1234.5, 2)
