"""What the API shows of a file on the server: its name, or its full path when the operator asks."""

from __future__ import annotations

from pathlib import Path

from app.settings.current import current_config


def file_path(path: str) -> str:
    """`path` as a client sees it: the file's name (where the operator keeps models is not a client's
    to know), or the whole path with LLM_SHOW_PATHS=1 (llama-server shows it)."""
    return path if current_config().show_paths else Path(path).name
