"""Which CPU variant a portable build loaded, read off the process's mapped files."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine import backends

_LIB = "/opt/llm/lib/python3.11/site-packages/llama_cpp/lib"
_MAPS = f"""\
7f1c2a000000-7f1c2a100000 r-xp 00000000 00:2a 1234 {_LIB}/libggml-base.so
7f1c2b000000-7f1c2b400000 r-xp 00000000 00:2a 1235 {_LIB}/libggml-cpu-zen4.so
7f1c2c000000-7f1c2c100000 r-xp 00000000 00:2a 1236 {_LIB}/libggml.so
"""


def test_the_variant_is_named_by_the_module_mapped() -> None:
    assert backends.cpu_variant(_MAPS) == "zen4"


def test_a_build_with_its_cpu_backend_built_in_has_no_variant() -> None:
    built_in = _MAPS.replace("libggml-cpu-zen4.so", "libggml-cpu.so")
    assert backends.cpu_variant(built_in) is None


def test_loading_on_this_machine_s_wheel_registers_nothing_more() -> None:
    # make install's wheel links its CPU backend in: load() finds it registered and adds none.
    before = backends.registry().ggml_backend_reg_count()
    backends.load()
    assert before >= 1 and backends.registry().ggml_backend_reg_count() == before
    assert backends.cpu_variant() is None


def test_without_proc_the_variant_goes_unnamed(monkeypatch: pytest.MonkeyPatch) -> None:
    # macOS has no /proc: the model must still load, its variant unnamed.
    def unreadable(_path: Path) -> str:
        raise FileNotFoundError("/proc/self/maps")

    monkeypatch.setattr(Path, "read_text", unreadable)
    assert backends.cpu_variant() is None
