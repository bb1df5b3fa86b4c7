"""API keys with names and optional limits: from LLM_API_KEYS (`name:key`) and LLM_API_KEYS_FILE."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,31}")  # what goes into logs and metric labels
_LIMITS = ("concurrency", "rpm", "tpm")
_FORMS = "concurrency=N, rpm=N, tpm=N (N >= 1)"


@dataclass(frozen=True)
class ApiKey:
    """One key: its name (logged, labelled; never the key), and its limits (None: unlimited)."""

    name: str
    key: str
    concurrency: int | None = None  # generations at once
    rpm: int | None = None  # requests per minute
    tpm: int | None = None  # prompt + completion tokens per minute

    @property
    def limited(self) -> bool:
        return any(getattr(self, limit) is not None for limit in _LIMITS)


def from_variable(raw: str) -> tuple[ApiKey, ...]:
    """LLM_API_KEYS: comma-separated `name:key` or bare keys (named key-1, key-2... by position)."""
    keys = []
    for position, item in enumerate((part.strip() for part in raw.split(",") if part.strip()), 1):
        name, colon, key = item.partition(":")
        if colon and key and _NAME.fullmatch(name):
            keys.append(ApiKey(name, key))
        else:
            keys.append(ApiKey(f"key-{position}", item))
    if not keys:
        raise ValueError("lists no keys")
    return keys_checked(tuple(keys))


def from_file_text(text: str) -> tuple[ApiKey, ...]:
    """LLM_API_KEYS_FILE's lines: `name key [concurrency=N] [rpm=N] [tpm=N]`, or a bare key."""
    keys = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if len(words) == 1:  # the older one-key-per-line form
            keys.append(ApiKey(f"line-{number}", words[0]))
            continue
        name, key, *options = words
        if not _NAME.fullmatch(name):
            raise ValueError(f"line {number}: {name!r} is not a name (letters, digits, _ . @ -, at most 32)")
        limits: dict[str, int] = {}
        for place, option in enumerate(options, 3):
            limit, _, value = option.partition("=")
            if limit not in _LIMITS or not value.isdigit() or int(value) < 1:
                # Not echoed: a key written in the wrong place must not land in a log.
                raise ValueError(f"line {number}: word {place} is not one of {_FORMS}")
            limits[limit] = int(value)
        keys.append(ApiKey(name, key, **limits))
    if not keys:
        raise ValueError("holds no keys")
    return keys_checked(tuple(keys))


def keys_checked(keys: tuple[ApiKey, ...]) -> tuple[ApiKey, ...]:
    """The keys, if no name and no key appears twice."""
    for what in ("name", "key"):
        seen: set[str] = set()
        for entry in keys:
            value = getattr(entry, what)
            if value in seen:
                shown = f" {value!r}" if what == "name" else ""  # never a key
                raise ValueError(f"the {what}{shown} appears twice")
            seen.add(value)
    return keys


# The last good reading of each key file. gunicorn re-reads its settings on SIGHUP, in
# the master and in every new worker: a file broken by an edit must not take the
# server down then, so the keys read before stay in force (and the error is logged).
# Module state on purpose: it survives the reload in the master, and fork hands it on.
_last_good: dict[str, tuple[ApiKey, ...]] = {}


def from_file(path: str) -> tuple[ApiKey, ...]:
    """LLM_API_KEYS_FILE: its keys; if it is unreadable or wrong after a good read, that read's keys."""
    try:
        keys = from_file_text(Path(path).read_text())
    except (OSError, ValueError) as exc:
        message = f"cannot read the file: {exc.strerror}" if isinstance(exc, OSError) else str(exc)
        if path not in _last_good:
            raise ValueError(message) from None
        log.error("LLM_API_KEYS_FILE=%s: %s; the keys read before stay in force", path, message)
        return _last_good[path]
    _last_good[path] = keys
    return keys
