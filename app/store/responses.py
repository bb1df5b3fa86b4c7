"""Stored Responses: kept with their input items, found again only by the key that wrote them."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import CursorResult, Delete, Engine, delete, insert, or_, select, update
from sqlalchemy.orm import Session

from app.store.database import upsert
from app.store.errors import guarded
from app.store.tables import ResponseEvent, StoredResponse

# The longest chain of previous_response_id links followed: far more turns than any
# context holds, and a bound on the work a client can ask of one request.
MAX_CHAIN = 1000


@dataclass(frozen=True)
class Turn:
    """What one stored response adds to a conversation: its input items, then its output items."""

    input_items: list[dict[str, Any]]
    output: list[dict[str, Any]]


class ResponseStore:
    """The responses table, for one owner at a time (an API key's name, "" without keys)."""

    def __init__(self, engine: Engine, ttl: int, clock: Any = time.time) -> None:
        self.engine, self.ttl, self.clock = engine, ttl, clock

    @guarded
    def save(
        self,
        owner: str,
        response: dict[str, Any],
        input_items: list[dict[str, Any]],
    ) -> None:
        """Keep `response` (as the client saw it) and its input; saving the same id again replaces it."""
        now = int(self.clock())
        row = {
            "id": response["id"],
            "owner": owner,
            "created_at": response.get("created_at") or now,
            "expires_at": now + self.ttl if self.ttl else None,
            "previous_response_id": response.get("previous_response_id"),
            "status": response["status"],
            "response": response,
            "input_items": input_items,
        }
        # One statement that writes from its start: SQLite then waits its turn behind another
        # writer, where a read followed by a write in one transaction would fail as "locked".
        statement = upsert(self.engine, StoredResponse, row, key="id")
        with self.engine.begin() as connection:
            connection.execute(statement)

    @guarded
    def get(self, owner: str, response_id: str) -> dict[str, Any] | None:
        """The Response; one cancelled while its run has not yet kept its last state says cancelled."""
        row = self._row(owner, response_id)
        if row is None:
            return None
        if row.status == "cancelled" and row.response.get("status") != "cancelled":
            return {**row.response, "status": "cancelled"}
        return row.response

    @guarded
    def input_items(self, owner: str, response_id: str) -> list[dict[str, Any]] | None:
        row = self._row(owner, response_id)
        return None if row is None else row.input_items

    @guarded
    def delete(self, owner: str, response_id: str) -> bool:
        """Remove one response; False if this owner has none by that id."""
        with Session(self.engine) as session, session.begin():
            gone = _deleted(
                session,
                delete(StoredResponse).where(StoredResponse.id == response_id, StoredResponse.owner == owner),
            )
            if gone:
                session.execute(delete(ResponseEvent).where(ResponseEvent.response_id == response_id))
            return bool(gone)

    @guarded
    def status(self, response_id: str) -> str | None:
        """The stored status of a response (any owner): a background run watches it for a cancel."""
        with Session(self.engine) as session:
            query = select(StoredResponse.status).where(StoredResponse.id == response_id)
            return session.execute(query).scalar_one_or_none()

    @guarded
    def cancel(self, owner: str, response_id: str) -> bool:
        """Mark a queued or running response cancelled; False if it had already finished."""
        with self.engine.begin() as connection:
            result = connection.execute(
                update(StoredResponse)
                .where(
                    StoredResponse.id == response_id,
                    StoredResponse.owner == owner,
                    StoredResponse.status.in_(("queued", "in_progress")),
                )
                .values(status="cancelled")
            )
            return bool(result.rowcount)

    @guarded
    def chain(self, owner: str, response_id: str) -> list[Turn] | None:
        """Every turn up to and including `response_id`, oldest first; None if a link is missing."""
        turns: list[Turn] = []
        next_id: str | None = response_id
        with Session(self.engine) as session:
            while next_id is not None and len(turns) < MAX_CHAIN:
                row = session.execute(self._select(owner, next_id)).scalar_one_or_none()
                if row is None:
                    return None
                turns.append(Turn(row.input_items, row.response.get("output") or []))
                next_id = row.previous_response_id
        return turns[::-1]

    @guarded
    def remove_expired(self, batch: int = 500) -> int:
        """Delete up to `batch` expired rows (small batches: a writer never holds the database long)."""
        now = int(self.clock())
        expired = (
            select(StoredResponse.id)
            .where(StoredResponse.expires_at.is_not(None), StoredResponse.expires_at <= now)
            .limit(batch)
        )
        with Session(self.engine) as session:
            ids = list(session.execute(expired).scalars())
        if not ids:
            return 0
        # Its own transaction, which writes from its first statement (see save).
        with Session(self.engine) as session, session.begin():
            session.execute(delete(ResponseEvent).where(ResponseEvent.response_id.in_(ids)))
            return _deleted(session, delete(StoredResponse).where(StoredResponse.id.in_(ids)))

    def _row(self, owner: str, response_id: str) -> StoredResponse | None:
        with Session(self.engine, expire_on_commit=False) as session:
            return session.execute(self._select(owner, response_id)).scalar_one_or_none()

    def _select(self, owner: str, response_id: str) -> Any:
        now = int(self.clock())
        return select(StoredResponse).where(
            StoredResponse.id == response_id,
            StoredResponse.owner == owner,
            or_(StoredResponse.expires_at.is_(None), StoredResponse.expires_at > now),
        )


class EventLog:
    """A background response's events in order: written as they happen, read by pollers and resumers."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @guarded
    def append(self, response_id: str, event: dict[str, Any]) -> None:
        row = {"response_id": response_id, "sequence_number": event["sequence_number"], "event": event}
        with self.engine.begin() as connection:
            connection.execute(insert(ResponseEvent).values(**row))

    @guarded
    def after(self, response_id: str, sequence_number: int, limit: int = 200) -> list[dict[str, Any]]:
        """The events numbered above `sequence_number`, in order."""
        query = (
            select(ResponseEvent.event)
            .where(ResponseEvent.response_id == response_id, ResponseEvent.sequence_number > sequence_number)
            .order_by(ResponseEvent.sequence_number)
            .limit(limit)
        )
        with Session(self.engine) as session:
            return list(session.execute(query).scalars())

    @guarded
    def forget(self, response_id: str) -> None:
        with self.engine.begin() as connection:
            connection.execute(delete(ResponseEvent).where(ResponseEvent.response_id == response_id))


def _deleted(session: Session, statement: Delete) -> int:
    """How many rows a DELETE removed (its result is a CursorResult, which Session.execute's type hides)."""
    result = cast(CursorResult[Any], session.execute(statement))
    return int(result.rowcount)
