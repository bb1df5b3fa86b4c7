"""Bringing the database up to the code's schema with Alembic, once, however many processes start at once."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text
from sqlalchemy.exc import SQLAlchemyError

from app.store.database import is_sqlite, open_engine, sqlite_path
from app.store.errors import StoreError, reason

MIGRATIONS = Path(__file__).with_name("migrations")
_PG_LOCK = 0x6C6C6D2D73746F  # any constant: the advisory lock every instance takes to migrate


def alembic_config(
    connection: Connection | None = None, owner_renames: dict[str, str] | None = None
) -> AlembicConfig:
    config = AlembicConfig()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    config.attributes["owner_renames"] = owner_renames or {}  # (revision 0006: names by place to digests)
    return config


def upgrade(url: str, owner_renames: dict[str, str] | None = None) -> str:
    """Run every migration the database lacks; the revision it is at afterwards. `owner_renames`:
    the owners named by a key's place before, each with its key's name now (revision 0006)."""
    path = sqlite_path(url) if is_sqlite(url) else None
    if path is not None:
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the folder of {path}: {exc.strerror}") from None
    engine = open_engine(url, pooled=False)
    try:
        with _one_at_a_time(path), engine.begin() as connection:
            if not is_sqlite(url):
                # Held to the end of this transaction: a second instance waits, then finds nothing to do.
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK})
            command.upgrade(alembic_config(connection, owner_renames), "head")
            return MigrationContext.configure(connection).get_current_revision() or "base"
    except SQLAlchemyError as exc:
        raise StoreError(reason(exc)) from None
    except OSError as exc:
        raise StoreError(f"{path}: {exc.strerror}") from None
    finally:
        engine.dispose()


def head() -> str:
    """The newest revision the code knows."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head() or "base"


@contextmanager
def _one_at_a_time(sqlite_file: str | None) -> Iterator[None]:
    """For SQLite, a lock file beside the database (its DDL does not wait on SQLite's own locks)."""
    if sqlite_file is None:
        yield
        return
    with open(f"{sqlite_file}.migrate-lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
