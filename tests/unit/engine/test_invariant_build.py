"""Which llama.cpp builds can run the batch-invariant kernels, read off llama.cpp's system info."""

from __future__ import annotations

import platform

import llama_cpp
import pytest

from app.engine.model import invariant_build


@pytest.mark.parametrize(
    ("info", "invariant"),
    [
        (b"CPU : AVX2 = 1 | OPENMP = 1 | REPACK = 1 | ", True),  # no sgemm at all
        (b"CPU : AVX2 = 1 | LLAMAFILE = 1 | SGEMM_ONE_ROW = 1 | REPACK = 1 | ", True),  # patched
        (b"CPU : AVX2 = 1 | LLAMAFILE = 1 | REPACK = 1 | ", False),  # sgemm unpatched: rows add up apart
    ],
)
def test_a_build_is_invariant_without_sgemm_or_with_the_one_row_patch(info: bytes, invariant: bool) -> None:
    assert invariant_build(info) is invariant


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the patch sends one row to sgemm on x86 only")
def test_the_installed_wheel_is_the_patched_one() -> None:
    # make install builds llama-cpp-python with deploy/llama-cpp/patches applied.
    info = llama_cpp.llama_print_system_info()
    assert b"LLAMAFILE = 1" in info and b"SGEMM_ONE_ROW = 1" in info and invariant_build(info)
