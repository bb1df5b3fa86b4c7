"""The store's errors: it cannot be opened or migrated, or the database failed a request."""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, ParamSpec, TypeVar

from sqlalchemy.exc import SQLAlchemyError

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")


class StoreError(Exception):
    """The store cannot be opened or migrated; the message says why, without the URL's password."""


class StoreUnavailableError(Exception):
    """The database failed or could not be reached while serving a request (details in the log)."""


def reason(exc: SQLAlchemyError) -> str:
    """The driver's own first line (e.g. 'connection refused'), never the statement or parameters."""
    original = getattr(exc, "orig", None) or exc
    text = str(original).strip()
    return text.splitlines()[0] if text else type(original).__name__


def _untraced(name: str) -> AbstractContextManager[Any]:
    return contextlib.nullcontext()


# What each store call runs in: a span when tracing is on (the app factory says so), else nothing.
_traced: Callable[[str], AbstractContextManager[Any]] = _untraced


def trace_calls(span: Callable[[str], AbstractContextManager[Any]]) -> None:
    """Run every store call inside `span(<Class.method>)` from now on."""
    global _traced
    _traced = span


def guarded(method: Callable[P, R]) -> Callable[P, R]:
    """A database failure as StoreUnavailableError (logged here with its cause), not a driver's error."""

    @functools.wraps(method)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            with _traced(method.__qualname__):
                return method(*args, **kwargs)
        except SQLAlchemyError as exc:
            log.error("the store failed: %s", reason(exc))
            raise StoreUnavailableError(reason(exc)) from None

    return call
