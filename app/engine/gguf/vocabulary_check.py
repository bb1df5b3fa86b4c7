"""A GGUF's vocabulary, checked before llama.cpp reads it: what would abort the process, not fail the load.

llama.cpp refuses most broken files with an error its loader returns (the server then
names the file and stops, or answers the request that asked for the model). A vocabulary
that lists one token twice is different: llama.cpp asserts (GGML_ASSERT in
llama_vocab::impl::load) and the whole worker aborts, and gunicorn starts another that
aborts again. So the tokens are read here first, as llama.cpp will read them: as C
strings (cut at a NUL), an empty one renamed `[EMPTY_<id>]`.
"""

from __future__ import annotations

import struct

from app.engine.gguf import gguf_metadata


class VocabularyError(ValueError):
    """The GGUF's vocabulary would abort llama.cpp; the message says why."""


def twice(tokens: list[bytes]) -> tuple[int, int, bytes] | None:
    """(first id, second id, text) of the first token llama.cpp would read twice, if one is."""
    seen: dict[bytes, int] = {}
    for index, raw in enumerate(tokens):
        text = raw.split(b"\0", 1)[0] or f"[EMPTY_{index}]".encode()
        if text in seen:
            return seen[text], index, text
        seen[text] = index
    return None


def check(path: str) -> None:
    """Raise VocabularyError if llama.cpp would abort on the vocabulary of the GGUF at `path` (a file
    that cannot be read is left to llama.cpp, which says why)."""
    try:
        tokens = gguf_metadata.tokens(path)
    except (OSError, ValueError, struct.error):
        return
    found = twice(tokens)
    if found is not None:
        first, second, text = found
        shown = text[:40].decode("utf-8", errors="replace")
        raise VocabularyError(
            f"its vocabulary holds the token {shown!r} twice (ids {first} and {second}), which "
            "llama.cpp cannot load (it would abort the process)"
        )
