"""The conversation store on a SQLite file: owners, order, pages, deletes."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.store import migrate
from app.store.conversations import ConversationStore
from app.store.database import open_engine


@pytest.fixture
def store(tmp_path: Path) -> ConversationStore:
    url = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    migrate.upgrade(url)
    return ConversationStore(open_engine(url))


def _items(*ids: str) -> list[dict[str, str]]:
    return [{"id": item_id, "type": "message"} for item_id in ids]


def test_a_conversation_belongs_to_its_owner(store: ConversationStore) -> None:
    created = store.create("alice", "conv_1", {"k": "v"})
    assert created == {"id": "conv_1", "object": "conversation", "created_at": created["created_at"],
                       "metadata": {"k": "v"}}  # fmt: skip
    assert store.get("bob", "conv_1") is None
    assert store.set_metadata("bob", "conv_1", {"k": "w"}) is None
    assert not store.delete("bob", "conv_1")
    assert store.get("alice", "conv_1") == created


def test_items_keep_their_order_and_page_both_ways(store: ConversationStore) -> None:
    store.create("", "conv_1", {})
    store.append("conv_1", _items("a", "b", "c"))
    store.append("conv_1", _items("d"))
    page = store.items("conv_1")
    assert page is not None and [i["id"] for i in page.items] == ["a", "b", "c", "d"] and not page.has_more
    newest = store.items("conv_1", limit=2, order="desc")
    assert newest is not None and [i["id"] for i in newest.items] == ["d", "c"] and newest.has_more
    rest = store.items("conv_1", after="c", limit=2, order="desc")
    assert rest is not None and [i["id"] for i in rest.items] == ["b", "a"] and not rest.has_more
    assert store.items("conv_1", after="nope") is None


def test_deleting_an_item_or_the_conversation(store: ConversationStore) -> None:
    store.create("", "conv_1", {})
    store.append("conv_1", _items("a", "b"))
    assert store.item("conv_1", "a") == {"id": "a", "type": "message"}
    assert store.delete_item("conv_1", "a") and not store.delete_item("conv_1", "a")
    assert store.count("conv_1") == 1
    assert store.delete("", "conv_1")
    assert store.get("", "conv_1") is None and store.count("conv_1") == 0
