"""The KV cache's disk tier (LLM_CACHE_DISK_MB): states host memory lets go, found again after a restart.

When the host cache (host_cache.py) evicts a state, and when a worker stops or unloads its
model, the states go to files (slot_files.py: the tokens, llama.cpp's state, checkpoints,
the engine's fingerprint and a checksum) in a folder of the model's fingerprint under
LLM_CACHE_DISK_PATH, which every worker, and the next server, reads. A prompt that resumes
a longer prefix from a file than from anything in memory gets that state back once the file
is verified whole and made by this model and these settings; a file that is not is skipped,
with a log line, and never loaded. The folder holds at most LLM_CACHE_DISK_MB, the least
recently used file going first. Files are written by a thread of their own, whole or not at
all, so a step never waits on the disk.
"""

from __future__ import annotations

import hashlib
import logging
import os
import queue
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.engine.cache import slot_files
from app.engine.cache.prefix_blocks import block_hashes
from app.engine.cache.saved_state import SavedState, longest
from app.engine.cache.slot_files import SlotFile, SlotFileError
from app.engine.memory import Resumable
from app.engine.native import NativeQueue, start_thread

log = logging.getLogger("app.engine.batcher")
SUFFIX = ".kv"
Write = tuple[Path, SlotFile, list[Path]]  # a state to write, and the files it makes redundant


@dataclass(frozen=True)
class Stored:
    """A file of the folder: the tokens its state holds (read from it), not yet the state itself."""

    path: Path
    tokens: tuple[int, ...]
    blocks: tuple[int, ...]
    resumable: Resumable
    scope: str = ""


class DiskCache:
    """States in files under `folder`/`fingerprint`; at most `limit` bytes in `folder`, least recent out."""

    def __init__(self, folder: Path, limit: int, fingerprint: str) -> None:
        self.root, self.limit, self.fingerprint = folder, limit, fingerprint
        self.folder = folder / fingerprint
        self.folder.mkdir(parents=True, exist_ok=True)
        self._index: dict[str, Stored] = {}
        self._listed = -1  # the folder's mtime when last listed
        self._refused: set[tuple[str, int, int]] = set()  # files skipped (name, mtime, size): said once
        self._writes: queue.SimpleQueue[Write | queue.SimpleQueue[bool] | None] = NativeQueue()
        # Put, maybe not yet written: (scope, tokens) by file name.
        self._queued: dict[str, tuple[str, tuple[int, ...]]] = {}
        self._writing = False
        self.restored_tokens = 0
        _remove_abandoned(folder)

    def find(self, prompt: list[int], beat: int, scope: str = "") -> tuple[SavedState, int] | None:
        """The stored state of cache `scope` that resumes the longest prefix of `prompt`, if that
        beats `beat` tokens by a block, loaded and verified; with the length it resumes."""
        self._refresh()
        while (found := longest(self._alike(scope), prompt, beat, scope)) is not None:
            stored, length = found
            saved = self._load(stored)
            if saved is not None:
                log.info(
                    "restoring %d of %d prompt tokens from the disk cache (%s)",
                    length,
                    len(prompt),
                    stored.path.name,
                )
                self.restored_tokens += length
                return saved, length
        return None

    def put(self, saved: SavedState) -> None:
        """Write `saved` to a file (in the writer's thread), unless its tokens are stored already; the
        files it holds a longer prefix than go once it is written."""
        if saved.adapters or not saved.tokens or saved.size > self.limit:
            return  # a file keeps the base model's cells only, as a slot file does
        self._refresh()
        held = len(saved.tokens)
        held_here = [s.tokens for s in self._alike(saved.scope)]
        held_here += [tokens for scope, tokens in self._queued.values() if scope == saved.scope]
        if any(tokens[:held] == saved.tokens for tokens in held_here):
            return
        shorter = [s.path for s in self._alike(saved.scope) if saved.tokens[: len(s.tokens)] == s.tokens]
        file = SlotFile(list(saved.tokens), saved.state, saved.live_from, saved.checkpoints, saved.scope)
        if not self._writing:
            self._writing = True
            start_thread(self._write_loop, ())
        name = _name(saved.tokens, saved.scope)
        self._queued[name] = (saved.scope, saved.tokens)
        self._writes.put((self.folder / name, file, shorter))

    def flush(self) -> None:
        """Wait until every state put so far is written."""
        if self._writing:
            written: queue.SimpleQueue[bool] = NativeQueue()
            self._writes.put(written)
            written.get()
        self._queued.clear()

    def close(self) -> None:
        """Write what is queued, then stop the writer's thread."""
        self.flush()
        if self._writing:
            self._writes.put(None)
            self._writing = False

    def _refresh(self) -> None:
        """Index the folder's files again if it changed (this worker's writes, or another's)."""
        try:
            listed = self.folder.stat().st_mtime_ns
        except FileNotFoundError:  # removed under us: made again for the next writes
            self.folder.mkdir(parents=True, exist_ok=True)
            listed = -2
        if listed == self._listed:
            return
        self._listed = listed
        names = {e.name: e for e in os.scandir(self.folder) if e.name.endswith(SUFFIX) and e.is_file()}
        self._index = {name: stored for name, stored in self._index.items() if name in names}
        self._queued = {name: tokens for name, tokens in self._queued.items() if name not in names}
        for name in names.keys() - self._index.keys():
            path = self.folder / name
            try:
                held, live_from, checkpoints, scope = slot_files.read_listing(path, self.fingerprint)
            except (SlotFileError, OSError) as refused:
                self._refuse(path, refused)
                continue
            tokens = tuple(held)
            resumable = Resumable(len(tokens), live_from, checkpoints)
            self._index[name] = Stored(path, tokens, tuple(block_hashes(tokens, scope)), resumable, scope)

    def _alike(self, scope: str) -> list[Stored]:
        return [stored for stored in self._index.values() if stored.scope == scope]

    def _load(self, stored: Stored) -> SavedState | None:
        """The state in `stored`'s file, if it is whole and this model's (else it leaves the index)."""
        try:
            saved, _ = slot_files.read(stored.path, self.fingerprint)
            if tuple(saved.tokens) != stored.tokens:
                raise SlotFileError("it holds other tokens than when it was listed")
            os.utime(stored.path)  # recently used: evicted last
        except (SlotFileError, OSError) as refused:
            self._index.pop(stored.path.name, None)
            self._refuse(stored.path, refused)
            return None
        return SavedState(
            stored.tokens, saved.state, stored.blocks, saved.live_from, saved.checkpoints, scope=stored.scope
        )

    def _refuse(self, path: Path, reason: Exception) -> None:
        try:
            stat = path.stat()
        except OSError:
            return  # gone (another worker evicted it): nothing to say
        mark = (path.name, stat.st_mtime_ns, stat.st_size)
        if mark not in self._refused:
            self._refused.add(mark)
            log.warning("disk cache: skipping %s: %s", path, reason)

    def _write_loop(self) -> None:
        while (item := self._writes.get()) is not None:
            if not isinstance(item, tuple):
                item.put(True)  # a flush: every write before it is done
                continue
            path, saved, shorter = item
            try:
                slot_files.write(path, self.fingerprint, saved)
                for prefix in shorter:  # held by the new file too
                    prefix.unlink(missing_ok=True)
                evict(self.root, self.limit)
            except OSError as failed:  # full or read-only: the state is simply not kept
                log.warning("disk cache: could not write %s (%s)", path.name, failed.strerror)


def evict(root: Path, limit: int) -> None:
    """Remove the least recently used files under `root` (every model's folder) until they fit `limit`."""
    files = []
    for folder in (e for e in os.scandir(root) if e.is_dir()):
        for entry in os.scandir(folder.path):
            if entry.name.endswith(SUFFIX) and not entry.name.startswith("."):
                try:
                    stat = entry.stat()
                except FileNotFoundError:
                    continue
                files.append((stat.st_mtime_ns, stat.st_size, entry.path))
    total = sum(size for _, size, _ in files)
    for _, size, path in sorted(files):
        if total <= limit:
            break
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass  # another worker evicted it
        total -= size


def _name(tokens: tuple[int, ...], scope: str) -> str:
    # Two tenants' files of the same tokens are two files: each is resumed by its own scope only.
    tagged = scope.encode() + np.asarray(tokens, dtype="<i4").tobytes()
    return hashlib.sha256(tagged).hexdigest()[:32] + SUFFIX


def _remove_abandoned(root: Path) -> None:
    """Remove the partial files of writers that died mid-write (their process is gone)."""
    for folder in (e for e in os.scandir(root) if e.is_dir()):
        for entry in os.scandir(folder.path):
            if not entry.name.endswith(slot_files.PARTIAL):
                continue
            pid = entry.name.removesuffix(slot_files.PARTIAL).rsplit(".", 1)[-1]
            if pid.isdigit() and not _alive(int(pid)):
                Path(entry.path).unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
