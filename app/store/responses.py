"""Stored Responses: kept with their input items, found again only by the key that wrote them."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from sqlalchemy import Engine, delete, or_, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.store.database import upsert
from app.store.errors import StoreUnavailableError, reason
from app.store.tables import StoredResponse

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")

# The longest chain of previous_response_id links followed: far more turns than any
# context holds, and a bound on the work a client can ask of one request.
MAX_CHAIN = 1000


@dataclass(frozen=True)
class Turn:
    """What one stored response adds to a conversation: its input items, then its output items."""

    input_items: list[dict[str, Any]]
    output: list[dict[str, Any]]


def _guarded(method: Callable[P, R]) -> Callable[P, R]:
    """A database failure as StoreUnavailableError (logged here with its cause), not a driver's error."""

    @functools.wraps(method)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except SQLAlchemyError as exc:
            log.error("the store failed: %s", reason(exc))
            raise StoreUnavailableError(reason(exc)) from None

    return guarded


class ResponseStore:
    """The responses table, for one owner at a time (an API key's name, "" without keys)."""

    def __init__(self, engine: Engine, ttl: int, clock: Any = time.time) -> None:
        self.engine, self.ttl, self.clock = engine, ttl, clock

    @_guarded
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

    @_guarded
    def get(self, owner: str, response_id: str) -> dict[str, Any] | None:
        row = self._row(owner, response_id)
        return None if row is None else row.response

    @_guarded
    def input_items(self, owner: str, response_id: str) -> list[dict[str, Any]] | None:
        row = self._row(owner, response_id)
        return None if row is None else row.input_items

    @_guarded
    def delete(self, owner: str, response_id: str) -> bool:
        """Remove one response; False if this owner has none by that id."""
        with Session(self.engine) as session, session.begin():
            result = session.execute(
                delete(StoredResponse).where(StoredResponse.id == response_id, StoredResponse.owner == owner)
            )
            return bool(result.rowcount)  # type: ignore[attr-defined]

    @_guarded
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

    @_guarded
    def remove_expired(self, batch: int = 500) -> int:
        """Delete up to `batch` expired rows (small batches: a writer never holds the database long)."""
        now = int(self.clock())
        expired = (
            select(StoredResponse.id)
            .where(StoredResponse.expires_at.is_not(None), StoredResponse.expires_at <= now)
            .limit(batch)
        )
        with Session(self.engine) as session, session.begin():
            result = session.execute(delete(StoredResponse).where(StoredResponse.id.in_(expired)))
            return int(result.rowcount)  # type: ignore[attr-defined]

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
