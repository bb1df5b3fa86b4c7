"""What llama.cpp's own log says of a model's load: where it went, and why it failed."""

from __future__ import annotations

from pathlib import Path

import llama_cpp
import pytest
from llama_cpp import _internals as internals

from app.engine import native_log

# llama.cpp 0.3.36's lines (load_tensors, llama_kv_cache) from a load with 31 of 31 layers offloaded.
_OFFLOADED = """\
load_tensors: offloading output layer to GPU
load_tensors: offloaded 31/31 layers to GPU
load_tensors:   CPU_Mapped model buffer size =    13.50 MiB
load_tensors:      Vulkan0 model buffer size =    78.60 MiB
llama_context: Vulkan_Host  output buffer size =     0.19 MiB
llama_kv_cache:    Vulkan0 KV buffer size =    11.25 MiB
sched_reserve:    Vulkan0 compute buffer size =    98.25 MiB
""".splitlines()


def test_the_placement_is_read_off_the_load_log() -> None:
    placement = native_log.placement(_OFFLOADED)
    assert (placement.layers, placement.of) == (31, 31)
    assert placement.buffers == {"CPU_Mapped": {"model": 13.5}, "Vulkan0": {"model": 78.6, "KV": 11.25}}
    assert (
        placement.described()
        == "31/31 layers on the GPU: CPU_Mapped model 13.5 MiB; Vulkan0 model 78.6 MiB, KV 11.2 MiB"
    )


def test_a_cpu_load_offloads_nothing() -> None:
    cpu = [line for line in _OFFLOADED if "offload" not in line and "Vulkan0" not in line]
    assert native_log.placement(cpu).layers == 0


def test_a_failed_load_says_llama_cpp_s_reason(tmp_path: Path) -> None:
    # llama-cpp-python says only that it failed; llama.cpp's log says why.
    native_log.install()
    junk = tmp_path / "not-a-model.gguf"
    junk.write_bytes(b"not a GGUF file at all")
    with pytest.raises(ValueError) as failed, native_log.recording() as loading:
        internals.LlamaModel(
            path_model=str(junk), params=llama_cpp.llama_model_default_params(), verbose=False
        )
    assert str(failed.value).startswith(f"Failed to load model from file: {junk}: ")
    assert "failed to load model" in str(failed.value).removeprefix("Failed to load model from file")
    assert loading.errors and any("magic" in line for line in loading.errors), loading.errors
