"""The offload path on a Vulkan device: Mesa's lavapipe under llama.cpp's Vulkan backend (`make test-gpu`).

lavapipe is a Vulkan driver that runs on the CPU. What these tests prove is the path a GPU build
takes through this server: the layers and the KV cache in the device's buffers, llama.cpp's
Vulkan kernels answering as the CPU's do within a measured bound, two workers each with their
copy on one device, a device that cannot hold the model refused at start-up in one line. What
only a real GPU can show (its speed, its memory, its kernels' sums) they do not.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator

import httpx
import pytest

from harness.servers import ROOT, Server, free_port
from tests.integration.conftest import assert_clean
from tests.support.exactness import complete

GUNICORN = ROOT / ".venv" / "gpu" / "bin" / "gunicorn"
# llama.cpp uses a device of the CPU type (lavapipe's) only when it is named.
DEVICE = {"GGML_VK_VISIBLE_DEVICES": "0", "LLM_N_GPU_LAYERS": "99"}
PROMPTS = ["The capital of France is", "def fibonacci(n):", "Water boils at", "Once upon a time, a fox"]
DEVIATION = 0.25  # nats a token's log-probability may differ by between lavapipe and the CPU (0.16 seen)

pytestmark = [
    pytest.mark.skipif(not GUNICORN.exists(), reason="make test-gpu builds the Vulkan venv first"),
    pytest.mark.timeout(900),
]


@pytest.fixture(scope="module")
def offloaded() -> Iterator[Server]:
    """Two workers, each with every layer on the one device."""
    server = Server(gunicorn=GUNICORN, LLM_WORKERS="2", LLM_N_THREADS="1", **DEVICE).wait_ready(timeout=600)
    yield server
    log = server.output()
    server.stop()
    assert_clean(log)


@pytest.fixture(scope="module")
def on_cpu() -> Iterator[Server]:
    server = Server(LLM_N_THREADS="1").wait_ready()
    yield server
    server.stop()


def test_the_layers_and_the_kv_cache_are_on_the_device_in_each_worker(offloaded: Server) -> None:
    offload = httpx.get(offloaded.url + "/props", timeout=30).json()["offload"]
    assert offload["layers"] > 0 and offload["layers_offloaded"] == offload["layers"], offload
    device = offload["buffers"]["Vulkan0"]
    assert device["model"] > 50 and device["KV"] > 0, offload  # SmolLM2's ~92 MiB, less what stays
    said = [line for line in offloaded.output().splitlines() if "layers on the GPU" in line]
    assert len(said) == 2, said  # one line per worker: each loaded its own copy onto the device
    whole = f"{offload['layers']}/{offload['layers']} layers on the GPU"
    assert all(whole in line and "Vulkan0 model" in line for line in said), said


def test_answers_follow_the_cpu_build_s_within_lavapipe_s_measured_bound(
    offloaded: Server, on_cpu: Server
) -> None:
    # Not within the near-tie rule: lavapipe's log-probabilities differ from the CPU backend's by up
    # to 0.16 nats a token (measured on these prompts, default and reproducible modes alike, fp16
    # and llama.cpp's quantized-activation paths on or off), so an answer may part at a token whose
    # lead was up to twice that (0.26 measured). Kernels computing something else would be off by
    # nats, and part at once.
    for prompt in PROMPTS:
        (cpu,) = complete(on_cpu.url, prompt, 32)
        (gpu,) = complete(offloaded.url, prompt, 32)
        for at, (mine, theirs) in enumerate(zip(cpu.tokens, gpu.tokens, strict=False)):
            ranked = sorted(cpu.top[at].values(), reverse=True)
            if mine != theirs:
                assert ranked[0] - ranked[1] < 2 * DEVIATION, (prompt, at, mine, theirs, cpu.top[at])
                break
            assert abs(cpu.top[at][mine] - gpu.top[at][theirs]) < DEVIATION, (
                prompt,
                at,
                cpu.top[at],
                gpu.top[at],
            )


def test_a_device_that_cannot_hold_the_model_stops_start_up_with_one_line() -> None:
    # lavapipe's memory is the host's; capping the device's buffers at 4 MiB, below a layer's share
    # of the weights, stands for a device too small: llama.cpp fails at the first buffer it cannot
    # allocate ("unable to allocate Vulkan0 buffer"), as it does on a device out of memory.
    env = {
        **os.environ, **DEVICE, "GGML_VK_FORCE_MAX_BUFFER_SIZE": str(4 << 20),
        "LLM_BIND": f"127.0.0.1:{free_port()}", "LLM_DATA_DIR": tempfile.mkdtemp(prefix="test-data-"),
    }  # fmt: skip
    result = subprocess.run(
        [str(GUNICORN), "-c", "gunicorn.conf.py", "wsgi:app"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 3, result.stderr[-3000:]
    (line,) = [line for line in result.stderr.splitlines() if "could not load it" in line]
    assert "Vulkan0" in line and "LLM_N_GPU_LAYERS=99" in line, line
    assert "Traceback" not in result.stderr
