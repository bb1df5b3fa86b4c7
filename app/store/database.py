"""The store's database: SQLAlchemy engines for SQLite (WAL, shared by every worker) and PostgreSQL."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, Executable, create_engine, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

# How long a writer waits for another process's write to finish before SQLite gives up.
# Every write here is one short statement, so a wait this long means something is wrong.
_SQLITE_BUSY_MS = 15_000


def normalized_url(url: str) -> str:
    """The URL with our drivers: psycopg (3) for PostgreSQL, the standard library for SQLite."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def sqlite_path(url: str) -> str | None:
    """The file a sqlite URL names (None for an in-memory database)."""
    database = make_url(url).database
    return database if database and database != ":memory:" else None


def open_engine(url: str, pooled: bool = True) -> Engine:
    """An engine for `url`; SQLite files in WAL mode, so readers never wait for writers."""
    url = normalized_url(url)
    options: dict[str, Any] = {"pool_pre_ping": True}
    if not pooled:  # one-off use, e.g. migrations in gunicorn's master before it forks
        options["poolclass"] = NullPool
    engine = create_engine(url, **options)
    if is_sqlite(url):
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")  # every worker (and host process) reads while one writes
    cursor.execute(f"PRAGMA busy_timeout={_SQLITE_BUSY_MS}")
    cursor.execute("PRAGMA synchronous=FULL")  # a stored row survives a power cut, not only a crash
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def upsert(engine: Engine, table: Any, row: dict[str, Any], key: str) -> Executable:
    """INSERT `row`, or UPDATE the row with the same `key`, in the dialect's own one statement."""
    insert = postgresql.insert if engine.dialect.name == "postgresql" else sqlite.insert
    statement = insert(table).values(**row)
    return statement.on_conflict_do_update(
        index_elements=[key], set_={name: value for name, value in row.items() if name != key}
    )
