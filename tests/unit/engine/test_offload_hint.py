"""What the one start-up line adds when a load with layers on a GPU could not allocate a buffer."""

from __future__ import annotations

from app.engine.loading import offload_hint

_FAILED = "Failed to create llama_context: failed to allocate Vulkan0 buffer of size 11796480"


def test_a_failed_allocation_with_layers_offloaded_names_the_setting() -> None:
    hint = offload_hint(_FAILED, 99)
    assert hint.startswith(" (LLM_N_GPU_LAYERS=99: the device could not hold") and "fewer workers" in hint


def test_nothing_is_added_on_the_cpu_or_for_another_failure() -> None:
    assert offload_hint(_FAILED, 0) == ""
    assert offload_hint("Failed to load model from file: x: data is not within the file bounds", 99) == ""
