"""The store on a SQLite file: migrations, owners, chains, expiry (the server suite runs PostgreSQL too)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.util.exc import CommandError

from app.store import migrate
from app.store.database import open_engine
from app.store.errors import StoreError
from app.store.responses import ResponseStore


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _response(response_id: str, previous: str | None = None, text: str = "hi") -> dict[str, Any]:
    output = [{"type": "message", "id": f"msg_{response_id}", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": text, "annotations": []}]}]  # fmt: skip
    return {"id": response_id, "object": "response", "created_at": 1, "status": "completed",
            "previous_response_id": previous, "output": output}  # fmt: skip


@pytest.fixture
def url(tmp_path: Path) -> str:
    database = f"sqlite:///{tmp_path / 'data' / 'store.sqlite3'}"
    assert migrate.upgrade(database) == migrate.head()
    return database


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(url: str, clock: Clock) -> ResponseStore:
    return ResponseStore(open_engine(url), ttl=60, clock=clock)


def test_migrating_twice_changes_nothing_and_the_tables_match_the_code(url: str) -> None:
    assert migrate.upgrade(url) == migrate.head()
    engine = open_engine(url)
    with engine.begin() as connection:
        command.check(migrate.alembic_config(connection))  # raises if tables.py and the migrations differ


def test_the_check_fails_when_the_code_has_a_table_the_migrations_lack(tmp_path: Path) -> None:
    empty = f"sqlite:///{tmp_path / 'empty.sqlite3'}"
    engine = open_engine(empty)
    with engine.begin() as connection, pytest.raises(CommandError):
        command.check(migrate.alembic_config(connection))


def test_a_folder_that_cannot_be_made_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(StoreError, match="cannot create the folder"):
        migrate.upgrade(f"sqlite:///{blocker / 'store.sqlite3'}")


def test_the_database_runs_in_wal_mode(url: str) -> None:
    with open_engine(url).connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_a_response_is_found_by_its_owner_only(store: ResponseStore) -> None:
    store.save("alice", _response("resp_1"), [{"type": "message", "id": "msg_in"}])
    found = store.get("alice", "resp_1")
    assert found is not None and found["id"] == "resp_1"
    assert store.input_items("alice", "resp_1") == [{"type": "message", "id": "msg_in"}]
    assert store.get("bob", "resp_1") is None
    assert store.chain("bob", "resp_1") is None
    assert not store.delete("bob", "resp_1")
    assert store.delete("alice", "resp_1")
    assert store.get("alice", "resp_1") is None


def test_saving_the_same_id_again_replaces_it(store: ResponseStore) -> None:
    store.save("", _response("resp_1", text="first"), [])
    store.save("", _response("resp_1", text="second"), [])
    found = store.get("", "resp_1")
    assert found is not None and found["output"][0]["content"][0]["text"] == "second"


def test_a_chain_comes_back_oldest_first_and_breaks_at_a_missing_link(store: ResponseStore) -> None:
    store.save("", _response("resp_1", text="one"), [{"n": 1}])
    store.save("", _response("resp_2", "resp_1", text="two"), [{"n": 2}])
    store.save("", _response("resp_3", "resp_2", text="three"), [{"n": 3}])
    turns = store.chain("", "resp_3")
    assert turns is not None
    assert [t.input_items for t in turns] == [[{"n": 1}], [{"n": 2}], [{"n": 3}]]
    assert [t.output[0]["content"][0]["text"] for t in turns] == ["one", "two", "three"]
    store.delete("", "resp_2")
    assert store.chain("", "resp_3") is None


def test_expired_rows_are_invisible_at_once_and_removed_by_the_sweep(
    store: ResponseStore, clock: Clock
) -> None:
    for n in range(7):
        store.save("", _response(f"resp_{n}"), [])
    clock.now += 61
    store.save("", _response("resp_new"), [])
    assert store.get("", "resp_0") is None
    assert store.remove_expired(batch=5) == 5
    assert store.remove_expired(batch=5) == 2
    assert store.remove_expired(batch=5) == 0
    assert store.get("", "resp_new") is not None


def test_with_no_ttl_nothing_expires(url: str, clock: Clock) -> None:
    store = ResponseStore(open_engine(url), ttl=0, clock=clock)
    store.save("", _response("resp_1"), [])
    clock.now += 10**9
    assert store.remove_expired() == 0
    assert store.get("", "resp_1") is not None


def test_owners_named_by_a_keys_place_move_to_its_name_once(tmp_path: Path, clock: Clock) -> None:
    # Stored under the names keys had by their place (before revision 0006): key-2 and line-5.
    database = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    engine = open_engine(database)
    with engine.begin() as connection:
        command.upgrade(migrate.alembic_config(connection), "0005")
    old = ResponseStore(engine, ttl=60, clock=clock)
    old.save("key-2", _response("resp_two"), [])
    old.save("line-5", _response("resp_five"), [])
    old.save("alice", _response("resp_alice"), [])
    renames = {"key-2": "key-433e1caaaa5f", "line-5": "key-99690b1b4700"}
    assert migrate.upgrade(database, renames) == migrate.head()
    store = ResponseStore(open_engine(database), ttl=60, clock=clock)
    assert store.get("key-433e1caaaa5f", "resp_two") is not None and store.get("key-2", "resp_two") is None
    assert store.get("key-99690b1b4700", "resp_five") is not None
    assert store.get("alice", "resp_alice") is not None
    # Once: a later start with the keys in other places moves nothing to whoever holds place 2 now.
    store.save("key-2", _response("resp_later"), [])  # (no key is named so now; a row written by hand)
    assert migrate.upgrade(database, {"key-2": "key-someone-else"}) == migrate.head()
    assert (
        store.get("key-2", "resp_later") is not None and store.get("key-someone-else", "resp_later") is None
    )
