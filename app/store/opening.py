"""The store of one worker process: its database engine, its tables' stores, its retention sweep."""

from __future__ import annotations

from dataclasses import dataclass

from app.store import retention
from app.store.batch_lines import BatchLines
from app.store.batches import BatchStore
from app.store.conversations import ConversationStore
from app.store.database import open_engine
from app.store.files import FileStore
from app.store.responses import EventLog, ResponseStore


@dataclass
class Store:
    """Everything kept for clients, in one database."""

    responses: ResponseStore
    conversations: ConversationStore
    events: EventLog  # background responses' streams
    files: FileStore
    batches: BatchStore
    batch_lines: BatchLines


def open_store(url: str, ttl: int, sweep: bool = True) -> Store:
    """A store on `url` (already migrated: see app.store.migrate), sweeping expired rows when `sweep`."""
    engine = open_engine(url)
    store = Store(
        ResponseStore(engine, ttl),
        ConversationStore(engine),
        EventLog(engine),
        FileStore(engine),
        BatchStore(engine),
        BatchLines(engine),
    )
    if sweep:
        retention.start([store.responses, store.files], ttl or 3600)
    return store
