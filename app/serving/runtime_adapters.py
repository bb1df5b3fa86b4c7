"""LoRA adapters loaded and unloaded at run time (vLLM's load_lora_adapter), where every worker reads them.

One JSON file in the server's run directory says, per model, which adapters were loaded
since start-up and which were unloaded. Every worker lays it over LLM_MODELS' entries
(`current_config()` does), so a name loaded through one worker is a model on all of them,
and a worker that starts later (a restart, an on-demand load) loads what its peers hold.
An adapter's place (its index) is never reused: LoRA scales are kept per place, and a
prompt cached under the adapter at place n must never meet another adapter there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from app.settings.config import Config
from app.settings.models import LoraSpec, ModelSpec

Entry = dict[str, Any]  # one model's: {"configured": [...], "unloaded": [ids], "added": [{id, path, state}]}
CHECKING, LOADED, UNLOADED = "checking", "loaded", "unloaded"


def _configured(spec: ModelSpec) -> list[list[Any]]:
    return [[lora.id, lora.path, lora.scale] for lora in spec.configured_adapters()]


class Registry:
    """The run directory's adapter file (None: one process, kept in memory), read once per change."""

    def __init__(self, rundir: str | None) -> None:
        self.path = Path(rundir) / "lora-adapters.json" if rundir is not None else None
        self._memory: dict[str, Entry] = {}
        self._seen: Any = None  # the file's (mtime_ns, size) when last read; in memory, a count
        # Each config overlaid (the worker's, the server's): by id, with the stamp it was made at.
        self._overlaid: dict[int, tuple[Config, Any, Config]] = {}

    def overlay(self, config: Config) -> Config:
        """`config` with each model's adapters as loaded and unloaded at run time (the same object
        while nothing changed, so that a request's many reads of it cost one stat)."""
        entries = self._read()
        cached = self._overlaid.get(id(config))
        if cached is not None and cached[0] is config and cached[1] == self._seen:
            return cached[2]
        models = tuple(effective(spec, entries.get(spec.id)) for spec in config.models)
        overlaid = config if models == config.models else dataclasses.replace(config, models=models)
        if len(self._overlaid) > 8:  # configs made once (an engine's) come and go
            self._overlaid.clear()
        self._overlaid[id(config)] = (config, self._seen, overlaid)
        return overlaid

    def change(self, spec: ModelSpec, edit: Callable[[Entry], Any]) -> Any:
        """Apply `edit` to model `spec`'s entry under the file's lock (other workers edit it too);
        what `edit` returns. An entry written for other LLM_MODELS adapters starts over."""
        with self._locked():
            entries = self._read(fresh=True)
            entry = entries.get(spec.id)
            if entry is None or entry.get("configured") != _configured(spec):
                entry = {"configured": _configured(spec), "unloaded": [], "added": []}
            result = edit(entry)
            entries[spec.id] = entry
            self._write(entries)
        return result

    def _read(self, fresh: bool = False) -> dict[str, Entry]:
        if self.path is None:
            return self._memory
        try:
            status = self.path.stat()
        except FileNotFoundError:
            self._seen, self._memory = None, {}
            return self._memory
        seen = (status.st_mtime_ns, status.st_size)
        if fresh or seen != self._seen:
            with contextlib.suppress(ValueError):  # written aside and renamed: never half a file
                self._memory = json.loads(self.path.read_text())
            self._seen = seen
        return self._memory

    def _write(self, entries: dict[str, Entry]) -> None:
        self._memory = entries
        if self.path is None:
            self._seen = (self._seen or 0) + 1
            return
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".lora-adapters-")
        with os.fdopen(handle, "w") as file:
            json.dump(entries, file)
        os.replace(temporary, self.path)
        self._seen = None  # read back next time, with the stat it has now

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        if self.path is None:
            yield
            return
        # Held for a read and a write of a small file: blocking the hub that long is harmless.
        with open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def effective(spec: ModelSpec, entry: Entry | None) -> ModelSpec:
    """Model `spec` with its adapters as `entry` says (LLM_MODELS' first, then those added, each
    in its place); `spec` itself when the entry is for other LLM_MODELS adapters."""
    if entry is None or entry.get("configured") != _configured(spec):
        return spec
    unloaded = set(entry["unloaded"])
    configured = [
        dataclasses.replace(lora, loaded=lora.id not in unloaded) for lora in spec.configured_adapters()
    ]
    added = [
        LoraSpec(item["id"], item["path"], 0.0, runtime=True, loaded=item["state"] == LOADED)
        for item in entry["added"]
    ]
    return dataclasses.replace(spec, loras=(*configured, *added))


def add(entry: Entry, spec: ModelSpec, name: str, path: str) -> int:
    """Keep a place for adapter `name` (not yet named by requests: it is being checked); its index."""
    entry["added"].append({"id": name, "path": path, "state": CHECKING})
    return len(spec.configured_adapters()) + len(entry["added"]) - 1


def settle(entry: Entry, spec: ModelSpec, index: int, loaded: bool) -> None:
    """The adapter at `index` (kept by `add`) checked: loaded, or its place left empty for good."""
    entry["added"][index - len(spec.configured_adapters())]["state"] = LOADED if loaded else UNLOADED


def remove(entry: Entry, spec: ModelSpec, name: str) -> bool:
    """Unload adapter `name` of the model (LLM_MODELS' or one loaded since); False if none is loaded."""
    for item in entry["added"]:
        if item["id"] == name and item["state"] == LOADED:
            item["state"] = UNLOADED
            return True
    configured = {lora.id for lora in spec.configured_adapters()}
    if name in configured and name not in entry["unloaded"]:
        entry["unloaded"].append(name)
        return True
    return False


def allowed_path(directories: tuple[str, ...] | None, asked: str) -> str:
    """The real path of adapter file `asked` (relative: in the first directory), if it lies in one of
    `directories` (LLM_LORA_DIRS); PermissionError if not (or none are set), FileNotFoundError if
    no such file is there."""
    if not directories:
        raise PermissionError(
            "loading LoRA adapters at run time is off (the operator allows it with LLM_LORA_DIRS)"
        )
    try:
        path = os.path.realpath(os.path.join(directories[0], os.path.expanduser(asked)))
    except ValueError:  # a NUL byte, or text no file name can hold
        raise FileNotFoundError(f"{asked!r} is not a file") from None
    if not any(os.path.commonpath([path, folder]) == folder for folder in directories):
        raise PermissionError(f"{asked} is outside the directories LLM_LORA_DIRS allows")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{asked} is not a file")
    return path
