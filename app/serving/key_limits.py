"""Per-key limits held across all workers: generations at once, requests and tokens per minute.

Any worker may take a key's next request, so the counts live in memory shared through
fork (made by the master before fork, like the peer table). Requests and tokens are
counted per second over a sliding minute; generations at once are counted per worker
(each worker writes only its own row), so the master can clear a dead worker's row and
no count outlives the worker that held it. A file lock (released by the kernel if its
holder dies) makes check-and-count one step, so two workers cannot both take the last place.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import mmap
import os
import struct
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from app.settings.keys import ApiKey

WINDOW = 60  # seconds: requests and tokens are limited per minute
MAX_KEYS = 1024  # distinct key names with limits, over the server's life (reloads included)
_NAME = 32
_BUCKET = struct.Struct("qq")  # a second (Unix time), what was counted during it
_COUNTERS = ("requests", "tokens")
_KEY_ROW = _NAME + len(_COUNTERS) * WINDOW * _BUCKET.size
_RUNNING = struct.Struct("q")


@dataclass
class Verdict:
    """Whether a request may start; why not; when to retry; OpenAI's x-ratelimit-* headers."""

    allowed: bool
    reason: str = ""
    retry_after: int = 0
    headers: dict[str, str] = field(default_factory=dict)


def duration(seconds: float) -> str:
    """OpenAI's reset format: `1s`, `6m0s`."""
    whole = max(0, math.ceil(seconds))
    return f"{whole // 60}m{whole % 60}s" if whole >= 60 else f"{whole}s"


class KeyLimits:
    """The shared counts, for `workers` worker seats (the peer table's) and up to MAX_KEYS names."""

    def __init__(self, workers: int) -> None:
        self._workers = workers
        self._running_at = MAX_KEYS * _KEY_ROW
        self._memory = mmap.mmap(-1, self._running_at + workers * MAX_KEYS * _RUNNING.size)
        descriptor, self._lock_path = tempfile.mkstemp(prefix="llm-key-limits-", suffix=".lock")
        os.close(descriptor)
        self._lock: tuple[int, int] | None = None  # (pid, descriptor): each process opens its own

    def admit(self, worker: int, key: ApiKey, now: float | None = None) -> Verdict:
        """Count a request of `key` on `worker` and one generation at once, if its limits allow."""
        second = int(time.time() if now is None else now)
        with self._locked():
            row = self._row(key.name)
            requests = self._window(row, "requests", second)
            tokens = self._window(row, "tokens", second)
            used_requests, used_tokens = sum(requests.values()), sum(tokens.values())
            running = sum(self._running(worker_seat, row) for worker_seat in range(self._workers))
            verdict = Verdict(True)
            if key.concurrency is not None and running >= key.concurrency:
                verdict = Verdict(False, f"{key.concurrency} generations at once", 1)
            elif key.rpm is not None and used_requests >= key.rpm:
                wait = _until_below(requests, key.rpm, second)
                verdict = Verdict(False, f"{key.rpm} requests per minute", wait)
            elif key.tpm is not None and used_tokens >= key.tpm:
                wait = _until_below(tokens, key.tpm, second)
                verdict = Verdict(False, f"{key.tpm} tokens per minute", wait)
            if verdict.allowed:
                self._set_running(worker, row, self._running(worker, row) + 1)
                self._add(row, "requests", second, 1)
                requests[second] = requests.get(second, 0) + 1
                used_requests += 1
        if key.rpm is not None:
            verdict.headers.update(_headers("requests", key.rpm, used_requests, requests, second))
        if key.tpm is not None:
            verdict.headers.update(_headers("tokens", key.tpm, used_tokens, tokens, second))
        if not verdict.allowed:
            verdict.headers["Retry-After"] = str(verdict.retry_after)
        return verdict

    def release(self, worker: int, key: ApiKey) -> None:
        """A generation of `key` admitted on `worker` has ended."""
        with self._locked():
            row = self._row(key.name)
            self._set_running(worker, row, max(0, self._running(worker, row) - 1))

    def count_tokens(self, key: ApiKey, tokens: int, now: float | None = None) -> None:
        """A request of `key` used `tokens` (prompt + completion)."""
        if tokens > 0:
            with self._locked():
                self._add(self._row(key.name), "tokens", int(time.time() if now is None else now), tokens)

    def running(self, key: ApiKey) -> int:
        """Generations of `key` at once, over all workers."""
        with self._locked():
            row = self._row(key.name)
            return sum(self._running(worker_seat, row) for worker_seat in range(self._workers))

    def clear_worker(self, worker: int) -> None:
        """Master, when a worker has exited: the generations it held are over."""
        with self._locked():
            start = self._running_at + worker * MAX_KEYS * _RUNNING.size
            self._memory[start : start + MAX_KEYS * _RUNNING.size] = bytes(MAX_KEYS * _RUNNING.size)

    def close(self) -> None:
        """Master, on exit: remove the lock file."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._lock_path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        if self._lock is None or self._lock[0] != os.getpid():  # a lock shared through fork excludes nobody
            self._lock = (os.getpid(), os.open(self._lock_path, os.O_RDWR))
        fcntl.flock(self._lock[1], fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._lock[1], fcntl.LOCK_UN)

    def _row(self, name: str) -> int:
        wanted = name.encode()[:_NAME].ljust(_NAME, b"\0")
        for row in range(MAX_KEYS):
            stored = self._memory[row * _KEY_ROW : row * _KEY_ROW + _NAME]
            if stored == wanted:
                return row
            if stored == bytes(_NAME):  # the first free row: the name's from now on
                self._memory[row * _KEY_ROW : row * _KEY_ROW + _NAME] = wanted
                return row
        raise RuntimeError(f"more than {MAX_KEYS} key names with limits")

    def _bucket_offset(self, row: int, counter: str, second: int) -> int:
        start = row * _KEY_ROW + _NAME + _COUNTERS.index(counter) * WINDOW * _BUCKET.size
        return start + (second % WINDOW) * _BUCKET.size

    def _window(self, row: int, counter: str, second: int) -> dict[int, int]:
        """What was counted in each second of the last minute."""
        found = {}
        for past in range(second - WINDOW + 1, second + 1):
            stamped, count = _BUCKET.unpack_from(self._memory, self._bucket_offset(row, counter, past))
            if stamped == past and count:
                found[past] = count
        return found

    def _add(self, row: int, counter: str, second: int, amount: int) -> None:
        offset = self._bucket_offset(row, counter, second)
        stamped, count = _BUCKET.unpack_from(self._memory, offset)
        _BUCKET.pack_into(self._memory, offset, second, amount + (count if stamped == second else 0))

    def _running(self, worker: int, row: int) -> int:
        running: int = _RUNNING.unpack_from(self._memory, self._running_offset(worker, row))[0]
        return running

    def _set_running(self, worker: int, row: int, value: int) -> None:
        _RUNNING.pack_into(self._memory, self._running_offset(worker, row), value)

    def _running_offset(self, worker: int, row: int) -> int:
        return self._running_at + (worker * MAX_KEYS + row) * _RUNNING.size


def _until_below(counts: dict[int, int], limit: int, second: int) -> int:
    """Seconds until enough of the minute's counts have left the window to be under `limit`."""
    used = sum(counts.values())
    for past in sorted(counts):
        used -= counts[past]
        if used < limit:
            return max(1, past + WINDOW - second)
    return 1


def _headers(counter: str, limit: int, used: int, counts: dict[int, int], second: int) -> dict[str, str]:
    # Reset: when the next unit frees up (the oldest of the minute leaves the window).
    reset = min(counts) + WINDOW - second if counts else 0
    return {
        f"x-ratelimit-limit-{counter}": str(limit),
        f"x-ratelimit-remaining-{counter}": str(max(0, limit - used)),
        f"x-ratelimit-reset-{counter}": duration(reset),
    }
