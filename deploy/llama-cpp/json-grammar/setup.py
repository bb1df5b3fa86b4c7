"""Compiles llama.cpp's converter from the llama-cpp-python sdist of this package's version.

LLAMA_CPP_SOURCE names that sdist's vendor/llama.cpp, unpacked (fetch-source.sh does it;
deploy/llama-cpp/wheel.sh and the Containerfile call it before building this).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from setuptools import Extension, setup

# The converter and what it needs; common.h is read for declarations only (the three string
# helpers it declares are defined in converter.cpp, so nothing of libllama is linked).
UPSTREAM = ("json-schema-to-grammar.cpp", "json-schema.cpp", "json.cpp", "trie.cpp", "unicode.cpp")

given = os.environ.get("LLAMA_CPP_SOURCE")
if not given:
    raise SystemExit("LLAMA_CPP_SOURCE: set it to an unpacked llama.cpp (fetch-source.sh makes one)")
# setuptools takes sources by paths relative to this folder only: a copy of what is needed.
source, fetched = Path("upstream"), Path(given)
shutil.rmtree(source, ignore_errors=True)
for part in ("common", "include", "ggml/include", "vendor/nlohmann"):
    shutil.copytree(fetched / part, source / part)
setup(
    ext_modules=[
        Extension(
            "llm_json_grammar._converter",
            sources=["converter.cpp", *(str(source / "common" / name) for name in UPSTREAM)],
            include_dirs=[str(source / part) for part in ("common", "include", "ggml/include", "vendor")],
            extra_compile_args=["-std=c++17", "-O2"],
            extra_link_args=["-Wl,-Bsymbolic"],
            language="c++",
        )
    ]
)
