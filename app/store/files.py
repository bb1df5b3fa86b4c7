"""Uploaded files, in the database in 1 MiB chunks: shared by every worker and host, never whole in memory.

In the database rather than on a local disk so that a batch submitted on one host can
run on another, and one backup (of the SQLite file, or pg_dump) holds everything.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator
from typing import IO, Any

from sqlalchemy import Engine, delete, insert, or_, select
from sqlalchemy.orm import Session

from app.store.conversations import Page
from app.store.errors import guarded
from app.store.tables import FileChunk, StoredFile

CHUNK = 1024 * 1024


class FileStore:
    """The files tables, for one owner at a time (an API key's name, "" without keys)."""

    def __init__(self, engine: Engine, clock: Any = time.time) -> None:
        self.engine, self.clock = engine, clock

    @guarded
    def create(
        self,
        owner: str,
        file_id: str,
        filename: str,
        purpose: str,
        source: IO[bytes] | Iterable[bytes],
        expires_after: int | None,
    ) -> dict[str, Any]:
        """Copy `source` (a file, or its pieces) in, a chunk per transaction (no writer waits long
        behind an upload), then list it."""
        pieces = iter(lambda: source.read(CHUNK), b"") if hasattr(source, "read") else source
        size = position = 0
        try:
            for data in _chunked(pieces):
                with self.engine.begin() as connection:
                    connection.execute(
                        insert(FileChunk).values(file_id=file_id, position=position, data=data)
                    )
                size, position = size + len(data), position + 1
            now = int(self.clock())
            expires_at = now + expires_after if expires_after else None
            row = {"id": file_id, "owner": owner, "filename": filename, "purpose": purpose, "bytes": size,
                   "created_at": now, "expires_at": expires_at}  # fmt: skip
            with self.engine.begin() as connection:
                connection.execute(insert(StoredFile).values(**row))
        except BaseException:
            self._drop_chunks(file_id)
            raise
        return file_object(row)

    @guarded
    def get(self, owner: str, file_id: str) -> dict[str, Any] | None:
        with Session(self.engine) as session:
            row = session.execute(self._visible(owner).where(StoredFile.id == file_id)).scalar_one_or_none()
            return None if row is None else file_object(_columns(row))

    @guarded
    def list(self, owner: str, purpose: str | None, after: str | None, limit: int, order: str) -> Page | None:
        """A page of this owner's files, newest first unless `order` is asc (None if `after` is unknown)."""
        query = self._visible(owner)
        if purpose:
            query = query.where(StoredFile.purpose == purpose)
        ascending = order == "asc"
        with Session(self.engine) as session:
            if after is not None:
                if (
                    session.execute(self._visible(owner).where(StoredFile.id == after)).scalar_one_or_none()
                    is None
                ):
                    return None
                query = query.where(StoredFile.id > after if ascending else StoredFile.id < after)
            # Ids begin with the time they were made (new_file_id()), so their order is the upload order.
            query = query.order_by(StoredFile.id if ascending else StoredFile.id.desc()).limit(limit + 1)
            rows = [file_object(_columns(row)) for row in session.execute(query).scalars()]
        return Page(rows[:limit], len(rows) > limit)

    def content(self, file_id: str) -> Iterator[bytes]:
        """The bytes, a chunk at a time (each read on its own: a download holds no transaction open)."""
        position = 0
        while True:
            data = self._chunk(file_id, position)
            if data is None:
                return
            yield data
            position += 1

    @guarded
    def _chunk(self, file_id: str, position: int) -> bytes | None:
        with Session(self.engine) as session:
            query = select(FileChunk.data).where(FileChunk.file_id == file_id, FileChunk.position == position)
            return session.execute(query).scalar_one_or_none()

    @guarded
    def delete(self, owner: str, file_id: str) -> bool:
        with self.engine.begin() as connection:
            result = connection.execute(
                delete(StoredFile).where(StoredFile.id == file_id, StoredFile.owner == owner)
            )
        if result.rowcount:
            self._drop_chunks(file_id)
        return bool(result.rowcount)

    @guarded
    def remove_expired(self, batch: int = 500) -> int:
        now = int(self.clock())
        expired = select(StoredFile.id).where(
            StoredFile.expires_at.is_not(None), StoredFile.expires_at <= now
        )
        with Session(self.engine) as session:
            ids = list(session.execute(expired.limit(batch)).scalars())
        for file_id in ids:
            with self.engine.begin() as connection:
                connection.execute(delete(StoredFile).where(StoredFile.id == file_id))
            self._drop_chunks(file_id)
        return len(ids)

    @guarded
    def discard(self, file_id: str) -> None:
        """Remove a file and any chunks left of it, listed or not (a writer that died half-way)."""
        with self.engine.begin() as connection:
            connection.execute(delete(StoredFile).where(StoredFile.id == file_id))
        self._drop_chunks(file_id)

    def _drop_chunks(self, file_id: str) -> None:
        with self.engine.begin() as connection:
            connection.execute(delete(FileChunk).where(FileChunk.file_id == file_id))

    def _visible(self, owner: str) -> Any:
        now = int(self.clock())
        return select(StoredFile).where(
            StoredFile.owner == owner, or_(StoredFile.expires_at.is_(None), StoredFile.expires_at > now)
        )


def _chunked(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """The pieces regrouped into CHUNK-sized ones (small writes of many lines become few rows)."""
    buffer = bytearray()
    for piece in pieces:
        buffer += piece
        while len(buffer) >= CHUNK:
            yield bytes(buffer[:CHUNK])
            del buffer[:CHUNK]
    if buffer:
        yield bytes(buffer)


def new_file_id() -> str:
    """A new file id that sorts by creation: nanoseconds since the epoch, then randomness."""
    return f"file-{time.time_ns():016x}{uuid.uuid4().hex[:16]}"


def _columns(row: StoredFile) -> dict[str, Any]:
    return {
        name: getattr(row, name)
        for name in ("id", "filename", "purpose", "bytes", "created_at", "expires_at")
    }


def file_object(row: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's File object."""
    return {
        "id": row["id"],
        "object": "file",
        "bytes": row["bytes"],
        "created_at": row["created_at"],
        "expires_at": row["expires_at"],
        "filename": row["filename"],
        "purpose": row["purpose"],
        "status": "processed",
        "status_details": None,
    }
