"""The batch store on SQLite: status changes by compare-and-set, line leases, results written once."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.store import migrate
from app.store.batch_lines import BatchLines
from app.store.batches import BatchStore
from app.store.database import open_engine


class Clock:
    now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def stores(tmp_path: Path, clock: Clock) -> tuple[BatchStore, BatchLines]:
    url = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    migrate.upgrade(url)
    engine = open_engine(url)
    return BatchStore(engine, clock=clock), BatchLines(engine, clock=clock)


def _running_batch(batches: BatchStore, lines: BatchLines, count: int, model: str = "") -> str:
    batch_id = str(batches.create("alice", "/v1/chat/completions", "file-1", None, None)["id"])
    rows = [{"line_no": n, "custom_id": f"c{n}", "model": model, "body": {"n": n}, "result": None}
            for n in range(1, count + 1)]  # fmt: skip
    lines.add(batch_id, rows)
    lines.add(batch_id, rows)  # a split done again adds nothing
    assert batches.change(batch_id, "validating", "in_progress")
    return batch_id


def test_lines_are_claimed_in_order_each_by_one_worker(stores: tuple[BatchStore, BatchLines]) -> None:
    batches, lines = stores
    batch_id = _running_batch(batches, lines, 3)
    first, second = lines.claim("w1", 30, ("m",)), lines.claim("w2", 30, ("m",))
    assert first is not None and second is not None
    assert (first.line_no, second.line_no) == (1, 2) and first.owner == "alice"
    assert lines.finish(first, "w1", {"ok": 1}, failed=False)
    assert not lines.finish(first, "w1", {"ok": 2}, failed=False)  # answered once
    assert not lines.finish(second, "w1", {"ok": 3}, failed=False)  # not w1's lease
    assert lines.unfinished(batch_id) == (1, 1)
    found = batches.get("alice", batch_id)
    assert found is not None and found["request_counts"] == {"total": 3, "completed": 1, "failed": 0}
    assert batches.get("bob", batch_id) is None


def test_a_lapsed_lease_lets_another_worker_run_the_line(
    stores: tuple[BatchStore, BatchLines], clock: Clock
) -> None:
    batches, lines = stores
    _running_batch(batches, lines, 1)
    held = lines.claim("dead", 30, ("m",))
    assert held is not None and lines.claim("w2", 30, ("m",)) is None
    clock.now += 20
    lines.renew("dead", 30)  # still alive at 20 s: its lease now runs to 50 s
    clock.now += 25
    assert lines.claim("w2", 30, ("m",)) is None
    clock.now += 10
    again = lines.claim("w2", 30, ("m",))
    assert again is not None and again.line_no == held.line_no and again.attempts == 2
    assert not lines.finish(held, "dead", {"late": True}, failed=False)  # the first run's answer is dropped
    assert lines.finish(again, "w2", {"ok": True}, failed=False)
    assert list(lines.results(again.batch_id, failed=False)) == [{"ok": True}]


def test_a_released_line_runs_again_without_counting_an_attempt(
    stores: tuple[BatchStore, BatchLines],
) -> None:
    batches, lines = stores
    _running_batch(batches, lines, 1)
    held = lines.claim("w1", 30, ("m",))
    assert held is not None
    lines.release(held, "w1")
    again = lines.claim("w2", 30, ("m",))
    assert again is not None and again.attempts == 1


def test_lines_go_to_workers_of_their_model(stores: tuple[BatchStore, BatchLines]) -> None:
    batches, lines = stores
    _running_batch(batches, lines, 1, model="embed")
    assert lines.claim("chat-worker", 30, ("chat",)) is None
    assert lines.claim("embed-worker", 30, ("embed",)) is not None


def test_status_changes_only_from_the_status_read(stores: tuple[BatchStore, BatchLines]) -> None:
    batches, lines = stores
    batch_id = _running_batch(batches, lines, 1)
    assert batches.change(batch_id, "in_progress", "cancelling")
    assert not batches.change(batch_id, "in_progress", "finalizing")  # a worker that read it earlier loses
    found = batches.get(None, batch_id)
    assert found is not None and found["status"] == "cancelling" and found["cancelling_at"] == 1_000_000
    assert batches.lease(batch_id, "cancelling", "w1", 60)
    assert not batches.lease(batch_id, "cancelling", "w2", 60)
    assert batches.lease(batch_id, "cancelling", "w1", 60)  # its own lease, kept


def test_an_expired_batch_answers_its_open_lines_with_errors(stores: tuple[BatchStore, BatchLines]) -> None:
    batches, lines = stores
    batch_id = _running_batch(batches, lines, 3)
    held = lines.claim("w1", 30, ("m",))
    assert held is not None and lines.finish(held, "w1", {"ok": 1}, failed=False)
    lines.close_unanswered(batch_id, lambda custom_id, line_no: {"expired": custom_id, "line": line_no})
    assert list(lines.results(batch_id, failed=True)) == [
        {"expired": "c2", "line": 2},
        {"expired": "c3", "line": 3},
    ]
    assert lines.unfinished(batch_id) == (0, 0)


def test_batches_are_listed_newest_first_per_owner(stores: tuple[BatchStore, BatchLines]) -> None:
    batches, _ = stores
    ids = [batches.create("alice", "/v1/completions", "file-1", {"n": str(n)}, None)["id"] for n in range(3)]
    batches.create("bob", "/v1/completions", "file-2", None, None)
    page = batches.list("alice", None, 2)
    assert page is not None and [b["id"] for b in page.items] == ids[::-1][:2] and page.has_more
    rest = batches.list("alice", page.items[-1]["id"], 2)
    assert rest is not None and [b["id"] for b in rest.items] == ids[:1] and not rest.has_more
    assert batches.list("bob", ids[0], 2) is None
