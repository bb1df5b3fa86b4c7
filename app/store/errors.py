"""The store's errors: it cannot be opened or migrated, or the database failed a request."""

from __future__ import annotations

from sqlalchemy.exc import SQLAlchemyError


class StoreError(Exception):
    """The store cannot be opened or migrated; the message says why, without the URL's password."""


class StoreUnavailableError(Exception):
    """The database failed or could not be reached while serving a request (details in the log)."""


def reason(exc: SQLAlchemyError) -> str:
    """The driver's own first line (e.g. 'connection refused'), never the statement or parameters."""
    original = getattr(exc, "orig", None) or exc
    text = str(original).strip()
    return text.splitlines()[0] if text else type(original).__name__
