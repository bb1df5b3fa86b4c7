"""Files the tests make once per machine (test models, adapters, projectors), written whole or not at all."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def machine_cache(name: str) -> Path:
    """The folder of ~/.cache/llm-server (or $XDG_CACHE_HOME's) where files of one kind are kept."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "llm-server" / name


def made_once(target: Path, write: Callable[[Path], object]) -> Path:
    """`target`, made by `write(path)` on first use: into a file of this process's own, then renamed
    over it, so two pytest processes making it at once each leave a whole file (the last one wins)."""
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.partial")
        write(partial)
        partial.replace(target)
    return target
