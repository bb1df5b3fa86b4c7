"""llama.cpp's JSON schema converter is built from the very sdist llama-cpp-python is: one version."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def pinned(name: str) -> str:
    text = (ROOT / "requirements.txt").read_text()
    found = re.search(rf"^{re.escape(name)}==(\S+)$", text, re.MULTILINE)
    assert found, name
    return found.group(1)


def test_the_converter_is_the_pinned_llama_cpp_pythons() -> None:
    project = tomllib.loads((ROOT / "deploy/llama-cpp/json-grammar/pyproject.toml").read_text())["project"]
    assert project["version"] == pinned("llama_cpp_python") == pinned("llm-json-grammar")
    assert version("llm-json-grammar") == version("llama_cpp_python") == project["version"]  # as installed
