"""The store's tables, declared once: Alembic's migrations create them, the store reads and writes them."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, Float, ForeignKey, Index, Integer, LargeBinary, String
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# PostgreSQL keeps JSON parsed (jsonb); SQLite keeps it as text.
Document = JSON().with_variant(JSONB(), "postgresql")


class Base(DeclarativeBase):
    pass


class StoredResponse(Base):
    """One Response as the client last saw it, with the input items it answered.

    `owner` is the name of the API key that wrote it ("" without keys): every read
    filters on it, so another key's rows do not exist for a client.
    """

    __tablename__ = "responses"

    id: Mapped[str] = mapped_column(String(80), primary_key=True)
    owner: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[int] = mapped_column(BigInteger)
    expires_at: Mapped[int | None] = mapped_column(BigInteger, index=True)  # None: kept for ever
    previous_response_id: Mapped[str | None] = mapped_column(String(80))
    status: Mapped[str] = mapped_column(String(20))
    response: Mapped[dict[str, Any]] = mapped_column(Document)
    input_items: Mapped[list[dict[str, Any]]] = mapped_column(Document)

    __table_args__ = (Index("ix_responses_owner_created", "owner", "created_at"),)


class Conversation(Base):
    """A conversation (OpenAI's Conversations API): its items live in conversation_items.

    As OpenAI's, a conversation is kept until deleted (LLM_STORE_TTL is for responses).
    """

    __tablename__ = "conversations"

    id: Mapped[str] = mapped_column(String(80), primary_key=True)
    owner: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[int] = mapped_column(BigInteger)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", Document)


class ConversationItem(Base):
    """One item of a conversation; `seq` orders them (it only grows, so appends never read first)."""

    __tablename__ = "conversation_items"

    seq: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    conversation_id: Mapped[str] = mapped_column(
        String(80), ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    item_id: Mapped[str] = mapped_column(String(120))
    item: Mapped[dict[str, Any]] = mapped_column(Document)


class ResponseEvent(Base):
    """One event of a background response's stream, for a client that polls or resumes it."""

    __tablename__ = "response_events"

    response_id: Mapped[str] = mapped_column(String(80), primary_key=True)
    sequence_number: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    event: Mapped[dict[str, Any]] = mapped_column(Document)


class StoredFile(Base):
    """An uploaded file's facts (OpenAI's File object); its bytes are in file_chunks."""

    __tablename__ = "files"

    id: Mapped[str] = mapped_column(String(80), primary_key=True)
    owner: Mapped[str] = mapped_column(String(200))
    filename: Mapped[str] = mapped_column(String(400))
    purpose: Mapped[str] = mapped_column(String(40))
    bytes: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[int] = mapped_column(BigInteger)
    expires_at: Mapped[int | None] = mapped_column(BigInteger, index=True)

    __table_args__ = (Index("ix_files_owner_created", "owner", "created_at"),)


class FileChunk(Base):
    """A piece of a file's bytes (1 MiB): uploads and downloads stream through, never whole in memory."""

    __tablename__ = "file_chunks"

    file_id: Mapped[str] = mapped_column(String(80), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class Batch(Base):
    """A batch job (OpenAI's Batch object) over an uploaded JSONL file; its requests are batch_lines.

    `lease_owner`/`lease_until` mark the worker splitting or finalizing it: another takes
    over once the lease has run out (the first one died).
    """

    __tablename__ = "batches"

    id: Mapped[str] = mapped_column(String(80), primary_key=True)
    owner: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[str] = mapped_column(String(20), index=True)
    endpoint: Mapped[str] = mapped_column(String(80))
    input_file_id: Mapped[str] = mapped_column(String(80))
    completion_window: Mapped[str] = mapped_column(String(20))
    # Every other field of the Batch object (timestamps, file ids, errors, metadata, counts).
    batch: Mapped[dict[str, Any]] = mapped_column(Document)
    lease_owner: Mapped[str | None] = mapped_column(String(120))
    lease_until: Mapped[float | None] = mapped_column(Float)

    __table_args__ = (Index("ix_batches_owner_created", "owner", "created_at"),)


class BatchLine(Base):
    """One request of a batch: pending, running (leased by a worker) or done with its result line.

    A result is written with the `done` state in one statement, by the lease's holder only,
    so a line is answered once however often its workers die.
    """

    __tablename__ = "batch_lines"

    batch_id: Mapped[str] = mapped_column(
        String(80), ForeignKey("batches.id", ondelete="CASCADE"), primary_key=True
    )
    line_no: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    custom_id: Mapped[str | None] = mapped_column(String(400))
    model: Mapped[str] = mapped_column(String(200))  # the model it names ("": any worker may run it)
    body: Mapped[dict[str, Any] | None] = mapped_column(Document)
    state: Mapped[str] = mapped_column(String(10))  # pending | running | done
    lease_owner: Mapped[str | None] = mapped_column(String(120))
    lease_until: Mapped[float | None] = mapped_column(Float)
    attempts: Mapped[int] = mapped_column(Integer)
    failed: Mapped[bool] = mapped_column(Boolean)  # its result belongs in the error file
    result: Mapped[dict[str, Any] | None] = mapped_column(Document)

    __table_args__ = (Index("ix_batch_lines_state", "state", "batch_id", "line_no"),)
