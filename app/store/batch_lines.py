"""A batch's requests as a queue every worker of every host takes from: leased, answered once.

A worker claims one pending line (or one whose lease ran out: its worker died) in one
statement, renews its leases while it runs them, and writes a result together with the
`done` state in one statement that holds only if its lease is still its own. So a line
in flight when its worker dies runs again elsewhere, and is never answered twice.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, and_, delete, func, or_, select, tuple_, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.store.errors import guarded
from app.store.tables import Batch, BatchLine

INSERT_ROWS = 500  # lines per insert: no writer holds SQLite's lock for long


@dataclass(frozen=True)
class Claimed:
    """A line this worker now runs: where it is, who owns its batch, what to send."""

    batch_id: str
    line_no: int
    custom_id: str | None
    body: dict[str, Any]
    attempts: int
    owner: str
    endpoint: str


class BatchLines:
    """The batch_lines table."""

    def __init__(self, engine: Engine, clock: Any = time.time) -> None:
        self.engine, self.clock = engine, clock

    @guarded
    def add(self, batch_id: str, lines: list[dict[str, Any]]) -> None:
        """Insert lines (each with line_no, custom_id, model, body, and a result if it is already
        answered); a line already there is left as it is, so a split done again adds nothing twice."""
        insert = postgresql.insert if self.engine.dialect.name == "postgresql" else sqlite.insert
        for start in range(0, len(lines), INSERT_ROWS):
            rows = [
                {
                    "batch_id": batch_id,
                    "line_no": line["line_no"],
                    "custom_id": line["custom_id"],
                    "model": line["model"],
                    "body": line["body"],
                    "attempts": 0,
                    "state": "done" if line["result"] is not None else "pending",
                    "failed": line["result"] is not None,
                    "result": line["result"],
                }  # fmt: skip
                for line in lines[start : start + INSERT_ROWS]
            ]
            with self.engine.begin() as connection:
                connection.execute(insert(BatchLine).values(rows).on_conflict_do_nothing())

    @guarded
    def claim(self, worker: str, seconds: float, models: tuple[str, ...]) -> Claimed | None:
        """Lease the oldest batch's next line this worker can run (its model, or any); None if none."""
        now = self.clock()
        claimable = or_(
            BatchLine.state == "pending", and_(BatchLine.state == "running", BatchLine.lease_until < now)
        )
        oldest = (
            select(BatchLine.batch_id, BatchLine.line_no)
            .join(Batch, Batch.id == BatchLine.batch_id)
            .where(Batch.status == "in_progress", claimable, BatchLine.model.in_(("", *models)))
            .order_by(BatchLine.batch_id, BatchLine.line_no)
            .limit(1)
            # PostgreSQL: two workers never pick the same row; SQLite runs one writer at a time anyway.
            .with_for_update(skip_locked=True, of=BatchLine)
        )
        statement = (
            update(BatchLine)
            # `=` a scalar subquery, which both databases evaluate once (PostgreSQL re-runs an IN
            # subquery per row scanned, and would claim every line at once).
            .where(tuple_(BatchLine.batch_id, BatchLine.line_no) == oldest.scalar_subquery(), claimable)
            .values(
                state="running",
                lease_owner=worker,
                lease_until=now + seconds,
                attempts=BatchLine.attempts + 1,
            )  # fmt: skip
            .returning(
                BatchLine.batch_id, BatchLine.line_no, BatchLine.custom_id, BatchLine.body, BatchLine.attempts
            )  # fmt: skip
        )
        with self.engine.begin() as connection:
            row = connection.execute(statement).first()
            if row is None:
                return None
            batch = connection.execute(
                select(Batch.owner, Batch.endpoint).where(Batch.id == row.batch_id)
            ).one()
        return Claimed(row.batch_id, row.line_no, row.custom_id, row.body or {}, row.attempts, *batch)

    @guarded
    def renew(self, worker: str, seconds: float) -> None:
        """Extend every lease this worker holds (it is alive and still running them)."""
        with self.engine.begin() as connection:
            connection.execute(
                update(BatchLine)
                .where(BatchLine.lease_owner == worker, BatchLine.state == "running")
                .values(lease_until=self.clock() + seconds)
            )

    @guarded
    def finish(self, line: Claimed, worker: str, result: dict[str, Any], failed: bool) -> bool:
        """Write the line's result with its `done` state; False if its lease is no longer this worker's."""
        with self.engine.begin() as connection:
            written = connection.execute(
                self._held(line, worker).values(
                    state="done", result=result, failed=failed, lease_owner=None, lease_until=None
                )
            )
        return bool(written.rowcount)

    @guarded
    def release(self, line: Claimed, worker: str) -> None:
        """Put a line back unanswered (made way for interactive work, or its batch is being cancelled)."""
        with self.engine.begin() as connection:
            connection.execute(
                self._held(line, worker).values(
                    state="pending", lease_owner=None, lease_until=None, attempts=BatchLine.attempts - 1
                )
            )

    @guarded
    def unfinished(self, batch_id: str) -> tuple[int, int]:
        """(pending lines, lines running under a lease that has not run out) of a batch."""
        now = self.clock()
        with Session(self.engine) as session:
            query = select(
                func.count().filter(BatchLine.state == "pending"),
                func.count().filter(BatchLine.state == "running", BatchLine.lease_until >= now),
                func.count().filter(BatchLine.state == "running", BatchLine.lease_until < now),
            ).where(BatchLine.batch_id == batch_id)
            pending, live, lapsed = session.execute(query).one()
        return int(pending) + int(lapsed), int(live)

    @guarded
    def close_unanswered(self, batch_id: str, result: Any) -> None:
        """Every line not done becomes done with `result(custom_id, line_no)` as its error (expiry)."""
        with Session(self.engine) as session:
            query = select(BatchLine.line_no, BatchLine.custom_id).where(
                BatchLine.batch_id == batch_id, BatchLine.state != "done"
            )
            open_lines = list(session.execute(query))
        for line_no, custom_id in open_lines:
            with self.engine.begin() as connection:
                connection.execute(
                    update(BatchLine)
                    .where(
                        BatchLine.batch_id == batch_id,
                        BatchLine.line_no == line_no,
                        BatchLine.state != "done",
                    )
                    .values(state="done", failed=True, result=result(custom_id, line_no), lease_owner=None)
                )

    def results(self, batch_id: str, failed: bool) -> Iterator[dict[str, Any]]:
        """The done lines' results of one file (output or errors), in line order, a page at a time."""
        after = -1
        while True:
            page = self._results_page(batch_id, failed, after)
            if not page:
                return
            for line_no, result in page:
                yield result
                after = line_no

    @guarded
    def _results_page(self, batch_id: str, failed: bool, after: int) -> list[tuple[int, dict[str, Any]]]:
        with Session(self.engine) as session:
            query = (
                select(BatchLine.line_no, BatchLine.result)
                .where(BatchLine.batch_id == batch_id, BatchLine.state == "done", BatchLine.failed == failed)
                .where(BatchLine.line_no > after)
                .order_by(BatchLine.line_no)
                .limit(INSERT_ROWS)
            )
            return [(int(line_no), result) for line_no, result in session.execute(query)]

    @guarded
    def drop(self, batch_id: str) -> None:
        """Forget a batch's lines (its results are in its files now)."""
        with self.engine.begin() as connection:
            connection.execute(delete(BatchLine).where(BatchLine.batch_id == batch_id))

    @staticmethod
    def _held(line: Claimed, worker: str) -> Any:
        return update(BatchLine).where(
            BatchLine.batch_id == line.batch_id,
            BatchLine.line_no == line.line_no,
            BatchLine.lease_owner == worker,
            BatchLine.state == "running",
        )
