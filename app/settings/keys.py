"""API keys with names and optional limits: from LLM_API_KEYS (`name:key`), LLM_API_KEYS_FILE and
LLM_ADMIN_KEYS (the operators').

A key's name is whose the server's data is (stored objects, slot files, the cache scope): a key
written without one is named after a digest of the key itself (`key-3f9a2c1b7d0e`), never after its
place in the list, so that removing one key hands its objects to no other. Before names were
digests a key without one was `key-N` (`line-N` in a file) by its place: `legacy_name` keeps that,
so that the store can move what those names own to the digests once (app/store/renames.py).
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, replace
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
    operator: bool = False  # an operator's key (LLM_ADMIN_KEYS): the operator's routes too
    legacy_name: str | None = None  # what a key without a name was called by its place, before

    @property
    def limited(self) -> bool:
        return any(getattr(self, limit) is not None for limit in _LIMITS)


def digest_name(key: str) -> str:
    """The name of a key given without one: a digest of the key (it shows nothing of the key)."""
    return "key-" + hashlib.sha256(key.encode()).hexdigest()[:12]


def from_variable(raw: str) -> tuple[ApiKey, ...]:
    """LLM_API_KEYS: comma-separated `name:key` or bare keys (named by a digest of the key)."""
    keys = []
    for position, item in enumerate((part.strip() for part in raw.split(",") if part.strip()), 1):
        name, colon, key = item.partition(":")
        if colon and key and _NAME.fullmatch(name):
            keys.append(ApiKey(name, key))
        else:
            keys.append(ApiKey(digest_name(item), item, legacy_name=f"key-{position}"))
    if not keys:
        raise ValueError("lists no keys")
    return keys_checked(tuple(keys))


def operators_from_variable(raw: str) -> tuple[ApiKey, ...]:
    """LLM_ADMIN_KEYS: as LLM_API_KEYS, each key an operator's."""
    return tuple(replace(key, operator=True, legacy_name=None) for key in from_variable(raw))


def from_file_text(text: str) -> tuple[ApiKey, ...]:
    """LLM_API_KEYS_FILE's lines: `name key [concurrency=N] [rpm=N] [tpm=N]`, or a bare key."""
    keys = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if len(words) == 1:  # the older one-key-per-line form
            keys.append(ApiKey(digest_name(words[0]), words[0], legacy_name=f"line-{number}"))
            continue
        name, key, *options = words
        if not _NAME.fullmatch(name):
            raise ValueError(f"line {number}: {name!r} is not a name (letters, digits, _ . @ -, at most 32)")
        limits: dict[str, int | None] = dict.fromkeys(_LIMITS)
        for place, option in enumerate(options, 3):
            limit, _, value = option.partition("=")
            if limit not in _LIMITS or not value.isdigit() or int(value) < 1:
                # Not echoed: a key written in the wrong place must not land in a log.
                raise ValueError(f"line {number}: word {place} is not one of {_FORMS}")
            limits[limit] = int(value)
        keys.append(ApiKey(name, key, limits["concurrency"], limits["rpm"], limits["tpm"]))
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
