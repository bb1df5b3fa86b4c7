"""The file store on SQLite: chunks in and out, owners, pages, expiry, a failed upload leaving nothing."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from app.store import migrate
from app.store.database import open_engine
from app.store.files import CHUNK, FileStore, new_file_id
from app.store.tables import FileChunk


class Clock:
    now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> FileStore:
    url = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    migrate.upgrade(url)
    return FileStore(open_engine(url), clock=Clock())


def test_a_file_goes_in_and_out_in_chunks(store: FileStore) -> None:
    data = bytes(range(256)) * (CHUNK // 128 + 3)  # two whole chunks and a piece
    made = store.create("alice", "file-1", "a.bin", "batch", io.BytesIO(data), None)
    assert made["bytes"] == len(data) and made["object"] == "file"
    assert b"".join(store.content("file-1")) == data
    assert len(list(store.content("file-1"))) == 3
    assert store.get("bob", "file-1") is None and not store.delete("bob", "file-1")
    assert store.delete("alice", "file-1") and list(store.content("file-1")) == []


def test_a_failed_upload_leaves_no_chunks(store: FileStore) -> None:
    class Broken(io.BytesIO):
        def read(self, size: int | None = -1) -> bytes:
            if self.tell() >= CHUNK:
                raise OSError("the client went away")
            return super().read(size)

    with pytest.raises(OSError):
        store.create("", "file-1", "a.bin", "batch", Broken(b"x" * (2 * CHUNK)), None)
    with store.engine.connect() as connection:
        assert connection.execute(FileChunk.__table__.select()).all() == []
    assert store.get("", "file-1") is None


def test_ids_sort_by_creation_and_pages_follow_them(store: FileStore) -> None:
    ids = [new_file_id() for _ in range(3)]
    assert ids == sorted(ids)
    for file_id in ids:
        store.create("", file_id, "a", "batch", io.BytesIO(b"{}"), None)
    page = store.list("", None, None, 2, "asc")
    assert page is not None and [f["id"] for f in page.items] == ids[:2] and page.has_more
    rest = store.list("", "batch", ids[1], 2, "asc")
    assert rest is not None and [f["id"] for f in rest.items] == ids[2:] and not rest.has_more
    newest = store.list("", None, None, 1, "desc")
    assert newest is not None and [f["id"] for f in newest.items] == ids[2:]
    assert store.list("", None, "file-unknown", 2, "asc") is None


def test_an_expired_file_is_gone_and_swept(store: FileStore) -> None:
    store.create("", "file-1", "a", "batch", io.BytesIO(b"{}"), 3600)
    store.clock.now += 3601
    assert store.get("", "file-1") is None
    assert store.remove_expired() == 1 and list(store.content("file-1")) == []
