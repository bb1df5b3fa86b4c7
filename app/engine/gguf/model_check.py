"""What an LLM_MODELS entry needs of its GGUF, checked before any worker serves (not when one loads it).

An embedding entry whose GGUF names no pooling type cannot embed: found only as its
worker loaded the model, the server had already said it was ready, then stopped. Here
gunicorn's master runs the check in a child process (`python -m app.engine.gguf.model_check`),
which reads each such GGUF's metadata through llama.cpp (its vocabulary only, no
weights); llama.cpp is never loaded in the master, whose workers fork from it.
"""

from __future__ import annotations

import ctypes
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from app.engine.gguf import vocabulary_check
from app.settings.config import Config
from app.settings.models import ModelSpec

_ROOT = Path(__file__).resolve().parents[3]  # the checkout, where `python -m app...` finds the app
POOLING_NONE = 0  # llama.cpp's LLAMA_POOLING_TYPE_NONE


class Unreadable(Exception):  # noqa: N818 - a fact about the file, not a failure of the check
    """llama.cpp cannot read the file at all."""


def needs_check(config: Config) -> list[tuple[int, ModelSpec]]:
    """The entries whose GGUF must say something the entry leaves out: embeddings with no `pooling`."""
    return [(index, spec) for index, spec in enumerate(config.models) if spec.embedding and not spec.pooling]


def exit_unless_servable(config: Config) -> None:
    """Master: run the check in a child if any entry needs it; on a problem, its one line was said: exit."""
    if not needs_check(config):
        return
    done = subprocess.run([sys.executable, "-m", "app.engine.gguf.model_check"], cwd=_ROOT, check=False)
    if done.returncode != 0:
        raise SystemExit(2)


def problems(config: Config) -> Iterator[str]:
    """One line per entry its GGUF cannot serve."""
    for index, spec in needs_check(config):
        try:
            pooling = metadata(spec.path, "{arch}.pooling_type")
        except Unreadable:
            continue  # its worker's own load says why, as for any model llama.cpp cannot load
        if pooling is None or pooling == str(POOLING_NONE):
            yield (
                f"LLM_MODELS {spec.describe(index)}: {spec.path} names no pooling type, so it cannot embed; "
                'set "pooling" (mean, cls or last) in the entry'
            )


def metadata(path: str, key: str) -> str | None:
    """A GGUF metadata value (`{arch}` in `key` is the model's architecture), read by llama.cpp."""
    import llama_cpp
    from llama_cpp._logger import set_verbose

    set_verbose(False)  # llama.cpp's loading log would bury the one line said
    try:
        vocabulary_check.check(path)
    except vocabulary_check.VocabularyError:
        raise Unreadable(path) from None  # llama.cpp would abort: its worker's load says why
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(path.encode(), params)
    if not model:
        raise Unreadable(path)
    try:

        def value(name: str) -> str | None:
            buffer = ctypes.create_string_buffer(256)
            written = llama_cpp.llama_model_meta_val_str(model, name.encode(), buffer, len(buffer))
            return buffer.value.decode(errors="replace") if written >= 0 else None

        arch = value("general.architecture") or ""
        return value(key.replace("{arch}", arch))
    finally:
        llama_cpp.llama_model_free(model)


def main() -> int:
    found = list(problems(Config.from_env()))
    for problem in found:
        print(f"configuration error: {problem}", file=sys.stderr)
    return 2 if found else 0


if __name__ == "__main__":
    sys.exit(main())
