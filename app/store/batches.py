"""Batch jobs: the Batch object of each, its status changed only from the status it was read in.

Every change of a batch is a compare-and-set on its status (one UPDATE ... WHERE status =
the one read), so a client's cancel and a worker's finalizing never overwrite each other:
the loser reads again. Splitting and finalizing are leased, so a worker that dies half-way
is replaced once its lease has run out; both are written to be done again safely.
"""

from __future__ import annotations

import builtins
import time
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, func, insert, or_, select, update
from sqlalchemy.orm import Session

from app.store.conversations import Page
from app.store.errors import guarded
from app.store.tables import Batch, BatchLine

WINDOW = 24 * 3600  # completion_window "24h", the only one OpenAI's API takes
RUNNING = ("validating", "in_progress", "finalizing", "cancelling")
ENDED = ("completed", "failed", "expired", "cancelled")
# The Batch object's fields kept in the row's document (the rest are columns).
_STAMPS = ("in_progress_at", "finalizing_at", "completed_at", "failed_at", "expired_at", "cancelling_at",
           "cancelled_at")  # fmt: skip


@dataclass(frozen=True)
class Due:
    """A batch not yet ended, as a worker tending batches sees it."""

    id: str
    status: str
    owner: str
    expires_at: int
    output_ttl: int | None  # seconds its result files are kept (None: as long as the store keeps files)


class BatchStore:
    """The batches table: for clients (by owner) and for the workers that run them (by lease)."""

    def __init__(self, engine: Engine, clock: Any = time.time) -> None:
        self.engine, self.clock = engine, clock

    @guarded
    def create(
        self,
        owner: str,
        endpoint: str,
        input_file_id: str,
        metadata: dict[str, str] | None,
        output_ttl: int | None,
    ) -> dict[str, Any]:
        now = int(self.clock())
        document = {"expires_at": now + WINDOW, "metadata": metadata, "errors": None,
                    "output_ttl": output_ttl, "output_file_id": None, "error_file_id": None,
                    "request_counts": None, **dict.fromkeys(_STAMPS)}  # fmt: skip
        row = {"id": new_batch_id(), "owner": owner, "created_at": now, "status": "validating",
               "endpoint": endpoint, "input_file_id": input_file_id, "completion_window": "24h",
               "batch": document}  # fmt: skip
        with self.engine.begin() as connection:
            connection.execute(insert(Batch).values(**row))
        return batch_object(row, {"total": 0, "completed": 0, "failed": 0})

    @guarded
    def get(self, owner: str | None, batch_id: str) -> dict[str, Any] | None:
        """The Batch object (None if it is not `owner`'s; any owner's when `owner` is None)."""
        with Session(self.engine) as session:
            row = session.get(Batch, batch_id)
            if row is None or (owner is not None and row.owner != owner):
                return None
            return batch_object(_columns(row), self._counts(session, row))

    @guarded
    def list(self, owner: str, after: str | None, limit: int) -> Page | None:
        """A page of this owner's batches, newest first (None if `after` is not one of them)."""
        query = select(Batch).where(Batch.owner == owner)
        with Session(self.engine) as session:
            if after is not None:
                known = session.get(Batch, after)
                if known is None or known.owner != owner:
                    return None
                query = query.where(Batch.id < after)  # ids begin with their creation time
            rows = list(session.execute(query.order_by(Batch.id.desc()).limit(limit + 1)).scalars())
            found = [batch_object(_columns(row), self._counts(session, row)) for row in rows[:limit]]
        return Page(found, len(rows) > limit)

    @guarded
    def change(self, batch_id: str, status: str, to: str, **fields: Any) -> bool:
        """Move the batch from `status` to `to`, setting `fields`; False if it was no longer `status`."""
        with Session(self.engine) as session:
            row = session.get(Batch, batch_id)
            if row is None or row.status != status:
                return False
            document = {**row.batch, **fields}
        stamp = {
            "in_progress": "in_progress_at",
            "finalizing": "finalizing_at",
            "cancelling": "cancelling_at",
        }
        key = stamp.get(to) or (f"{to}_at" if to in ENDED else None)
        if key and to != status:
            document[key] = int(self.clock())
        with self.engine.begin() as connection:
            result = connection.execute(
                update(Batch)
                .where(Batch.id == batch_id, Batch.status == status)
                .values(status=to, batch=document, lease_owner=None, lease_until=None)
            )
        return bool(result.rowcount)

    @guarded
    def lease(self, batch_id: str, status: str, worker: str, seconds: float) -> bool:
        """Take (or keep) the batch for splitting or finalizing, unless a live lease of another holds it."""
        now = self.clock()
        with self.engine.begin() as connection:
            result = connection.execute(
                update(Batch)
                .where(
                    Batch.id == batch_id,
                    Batch.status == status,
                    or_(Batch.lease_until.is_(None), Batch.lease_until < now, Batch.lease_owner == worker),
                )
                .values(lease_owner=worker, lease_until=now + seconds)
            )
        return bool(result.rowcount)

    @guarded
    def active(self) -> builtins.list[Due]:
        """Every batch not yet ended: the work a worker may find to do."""
        with Session(self.engine) as session:
            rows = session.execute(select(Batch).where(Batch.status.in_(RUNNING)).order_by(Batch.id))
            return [
                Due(row.id, row.status, row.owner, int(row.batch["expires_at"]), row.batch.get("output_ttl"))
                for row in rows.scalars()
            ]

    @guarded
    def endpoint_and_file(self, batch_id: str) -> tuple[str, str]:
        with Session(self.engine) as session:
            row = session.get(Batch, batch_id)
            assert row is not None, "asked only of a batch being split"
            return row.endpoint, row.input_file_id

    @staticmethod
    def _counts(session: Session, row: Batch) -> dict[str, int]:
        """request_counts: kept once the batch ended, else counted from its lines (no counter to contend)."""
        if row.batch.get("request_counts") is not None:
            return dict(row.batch["request_counts"])
        query = (
            select(BatchLine.failed, func.count())
            .where(BatchLine.batch_id == row.id, BatchLine.state == "done")
            .group_by(BatchLine.failed)
        )
        done = {bool(failed): int(count) for failed, count in session.execute(query)}
        total = session.execute(select(func.count()).where(BatchLine.batch_id == row.id)).scalar_one()
        return {"total": int(total), "completed": done.get(False, 0), "failed": done.get(True, 0)}


def new_batch_id() -> str:
    """A new batch id that sorts by creation: nanoseconds since the epoch, then randomness."""
    return f"batch_{time.time_ns():016x}{uuid.uuid4().hex[:16]}"


def result_file_ids(batch_id: str) -> tuple[str, str]:
    """The output and error files' ids, fixed by the batch's, so a finalizer taking over rewrites the same."""
    key = batch_id.removeprefix("batch_")
    return f"file-{key}-output", f"file-{key}-errors"


def _columns(row: Batch) -> dict[str, Any]:
    return {name: getattr(row, name) for name in ("id", "owner", "created_at", "status", "endpoint",
            "input_file_id", "completion_window", "batch")}  # fmt: skip


def batch_object(row: dict[str, Any], counts: dict[str, int]) -> dict[str, Any]:
    """OpenAI's Batch object."""
    document = row["batch"]
    return {
        "id": row["id"],
        "object": "batch",
        "endpoint": row["endpoint"],
        "errors": document.get("errors"),
        "input_file_id": row["input_file_id"],
        "completion_window": row["completion_window"],
        "status": row["status"],
        "output_file_id": document.get("output_file_id"),
        "error_file_id": document.get("error_file_id"),
        "created_at": row["created_at"],
        "expires_at": document.get("expires_at"),
        **{stamp: document.get(stamp) for stamp in _STAMPS},
        "request_counts": counts,
        "metadata": document.get("metadata"),
        "model": document.get("model"),  # once it has ended: the model its answers name
        "usage": document.get("usage"),  # once it has ended: tokens summed over its answers
    }
