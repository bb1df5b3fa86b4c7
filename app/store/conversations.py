"""Conversations and their items: appended in order, paged by position, each owned by an API key's name."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Engine, Table, delete, func, insert, select, update
from sqlalchemy.orm import Session

from app.store.errors import guarded
from app.store.tables import Conversation, ConversationItem

# The tables themselves, for bulk inserts keyed by column name ("metadata" is metadata_ on the class).
_CONVERSATIONS = cast(Table, Conversation.__table__)
_ITEMS = cast(Table, ConversationItem.__table__)


@dataclass(frozen=True)
class Page:
    items: list[dict[str, Any]]
    has_more: bool


class ConversationStore:
    """The conversations tables, for one owner at a time (an API key's name, "" without keys)."""

    def __init__(self, engine: Engine, clock: Any = time.time) -> None:
        self.engine, self.clock = engine, clock

    @guarded
    def create(self, owner: str, conversation_id: str, metadata: dict[str, str]) -> dict[str, Any]:
        created = int(self.clock())
        row = {"id": conversation_id, "owner": owner, "created_at": created, "metadata": metadata}
        with self.engine.begin() as connection:
            connection.execute(insert(_CONVERSATIONS).values(**row))
        return _object(conversation_id, created, metadata)

    @guarded
    def get(self, owner: str, conversation_id: str) -> dict[str, Any] | None:
        with Session(self.engine) as session:
            row = session.get(Conversation, conversation_id)
            return (
                None if row is None or row.owner != owner else _object(row.id, row.created_at, row.metadata_)
            )

    @guarded
    def set_metadata(
        self, owner: str, conversation_id: str, metadata: dict[str, str]
    ) -> dict[str, Any] | None:
        with Session(self.engine) as session, session.begin():
            session.execute(
                update(Conversation)
                .where(Conversation.id == conversation_id, Conversation.owner == owner)
                .values(metadata_=metadata)
            )
        return self.get(owner, conversation_id)

    @guarded
    def delete(self, owner: str, conversation_id: str) -> bool:
        """Forget a conversation and its items (their rows go first: SQLite checks no cascade by default)."""
        if self.get(owner, conversation_id) is None:
            return False
        with Session(self.engine) as session, session.begin():
            session.execute(
                delete(ConversationItem).where(ConversationItem.conversation_id == conversation_id)
            )
            session.execute(delete(Conversation).where(Conversation.id == conversation_id))
        return True

    @guarded
    def append(self, conversation_id: str, items: list[dict[str, Any]]) -> None:
        """Add `items` (each with its id) after the last; the caller has checked the owner."""
        if not items:
            return
        rows = [{"conversation_id": conversation_id, "item_id": item["id"], "item": item} for item in items]
        with self.engine.begin() as connection:
            connection.execute(insert(_ITEMS), rows)

    @guarded
    def items(
        self, conversation_id: str, after: str | None = None, limit: int | None = None, order: str = "asc"
    ) -> Page | None:
        """A page of items in `order` after the item `after` (None if there is no such item)."""
        ascending = order == "asc"
        query = select(ConversationItem.item).where(ConversationItem.conversation_id == conversation_id)
        with Session(self.engine) as session:
            if after is not None:
                position = session.execute(self._position(conversation_id, after)).scalar_one_or_none()
                if position is None:
                    return None
                query = query.where(
                    ConversationItem.seq > position if ascending else ConversationItem.seq < position
                )
            query = query.order_by(ConversationItem.seq if ascending else ConversationItem.seq.desc())
            if limit is not None:
                query = query.limit(limit + 1)
            found = list(session.execute(query).scalars())
        has_more = limit is not None and len(found) > limit
        return Page(found[:limit] if limit is not None else found, has_more)

    @guarded
    def item(self, conversation_id: str, item_id: str) -> dict[str, Any] | None:
        with Session(self.engine) as session:
            query = select(ConversationItem.item).where(
                ConversationItem.conversation_id == conversation_id, ConversationItem.item_id == item_id
            )
            return session.execute(query.limit(1)).scalar_one_or_none()

    @guarded
    def delete_item(self, conversation_id: str, item_id: str) -> bool:
        with self.engine.begin() as connection:
            result = connection.execute(
                delete(ConversationItem).where(
                    ConversationItem.conversation_id == conversation_id, ConversationItem.item_id == item_id
                )
            )
            return bool(result.rowcount)

    @guarded
    def count(self, conversation_id: str) -> int:
        with Session(self.engine) as session:
            query = select(func.count()).where(ConversationItem.conversation_id == conversation_id)
            return int(session.execute(query).scalar_one())

    @staticmethod
    def _position(conversation_id: str, item_id: str) -> Any:
        return (
            select(ConversationItem.seq)
            .where(ConversationItem.conversation_id == conversation_id, ConversationItem.item_id == item_id)
            .limit(1)
        )


def _object(conversation_id: str, created_at: int, metadata: dict[str, Any]) -> dict[str, Any]:
    """The Conversation object, as OpenAI's API answers it."""
    return {"id": conversation_id, "object": "conversation", "created_at": created_at, "metadata": metadata}
