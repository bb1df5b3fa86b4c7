"""The image, built with podman as `make image` builds it, run as a pod runs it."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import assert_clean
from tests.support import containers
from tests.support.clients import openai_client
from tests.support.exactness import complete
from tests.support.rawhttp import RawStream, fetch, finish_reason
from tests.support.waits import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(containers.unavailable() is not None, reason=str(containers.unavailable())),
    pytest.mark.timeout(900),  # the first test builds the image: a Debian base, then the two stages
]


@pytest.fixture(scope="module")
def image() -> str:
    return containers.built_image()


@pytest.fixture
def container(image: str) -> Iterator[containers.Container]:
    started = containers.Container(image, LLM_WORKERS="2", LLM_N_THREADS="1").wait_ready()
    yield started
    log = started.output()
    started.stop()
    assert_clean(log)


def test_runs_as_a_non_root_user_under_tini_with_a_read_only_root(container: containers.Container) -> None:
    assert container.execute("id", "-u").strip() == "10001"
    assert container.execute("cat", "/proc/1/comm").strip() == "tini"
    with pytest.raises(subprocess.CalledProcessError):
        container.execute("touch", "/srv/llm/written")
    health = container.podman("healthcheck", "run", container.name)
    assert health.returncode == 0, health.stderr


def test_a_streamed_chat_completion_through_the_container(container: containers.Container) -> None:
    with openai_client(container) as client:
        stream = client.chat.completions.create(
            model="SmolLM2-135M-Instruct.Q4_1",
            messages=[{"role": "user", "content": "Say hello."}],
            max_tokens=12,
            stream=True,
        )
        chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")


def test_sigterm_drains_a_running_stream_and_exits_0(container: containers.Container) -> None:
    stream = RawStream(
        container.port, {"prompt": "Once", "max_tokens": 200, "ignore_eos": True, "stream": True}
    )
    stream.started()
    stopping = threading.Thread(target=container.podman, args=("stop", "--time", "60", container.name))
    stopping.start()
    wait_until(lambda: fetch(container.port, "GET", "/health/ready").status == 503, 5, "not ready")
    assert fetch(container.port, "GET", "/health").status == 200
    chunks = stream.rest()
    assert chunks[-1] == b"data: [DONE]\n\n" and finish_reason(chunks) == "length"
    stopping.join(timeout=60)
    assert container.exit_code() == 0
    assert "drained: no request is generating" in container.output()


def test_a_bad_setting_stops_the_container_with_one_line(image: str) -> None:
    bad = containers.Container(image, LLM_N_CTX="lots")
    try:
        assert bad.exit_code() == 2
        lines = [line for line in bad.output().splitlines() if line.strip()]
        assert lines == ["configuration error: LLM_N_CTX='lots': must be an integer >= 1"], lines
    finally:
        bad.stop()


# llama.cpp's x86 CPU variants (ggml/src/CMakeLists.txt, GGML_CPU_ALL_VARIANTS) but its AMX one,
# which deploy/llama-cpp/patches/portable/no-amx-variant.patch leaves out: the features each needs.
_VARIANTS = {
    "x64": (),
    "sse42": ("SSE42",),
    "sandybridge": ("SSE42", "AVX"),
    "ivybridge": ("SSE42", "AVX", "F16C"),
    "piledriver": ("SSE42", "AVX", "F16C", "FMA"),
    "haswell": ("SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2"),
    "skylakex": ("SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512"),
    "cannonlake": ("SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VBMI"),
    "cascadelake": ("SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VNNI"),
    "icelake": ("SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VBMI", "AVX512_VNNI"),
    "cooperlake": ("SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VNNI", "AVX512_BF16"),
    "zen4": ("SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VBMI", "AVX512_VNNI",
             "AVX512_BF16"),
    "alderlake": ("SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX_VNNI"),
}  # fmt: skip
# Each feature's /proc/cpuinfo flags, and its weight in ggml's score (ggml-cpu/arch/x86/cpu-feats.cpp).
_FEATURES = {
    "FMA": (("fma",), 1), "F16C": (("f16c",), 2), "SSE42": (("sse4_2",), 4), "BMI2": (("bmi2",), 8),
    "AVX": (("avx",), 16), "AVX2": (("avx2",), 32), "AVX_VNNI": (("avx_vnni",), 64),
    "AVX512": (("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"), 128),
    "AVX512_VBMI": (("avx512vbmi",), 256), "AVX512_BF16": (("avx512_bf16",), 512),
    "AVX512_VNNI": (("avx512_vnni",), 1024),
}  # fmt: skip


def best_variant(flags: set[str]) -> str:
    """The variant ggml scores highest on a CPU with these flags: every feature it needs, the most weight."""

    def score(features: tuple[str, ...]) -> int:
        if not all(set(_FEATURES[f][0]) <= flags for f in features):
            return 0
        return 1 + sum(_FEATURES[f][1] for f in features)

    return max(_VARIANTS, key=lambda name: score(_VARIANTS[name]))


def test_the_best_variant_is_told_from_the_flags() -> None:
    # The expectation the next test holds the image to, on CPUs other than this one.
    assert best_variant({"sse4_2", "avx", "f16c", "fma", "avx2", "bmi2"}) == "haswell"
    assert best_variant({"sse4_2", "avx", "f16c", "fma", "avx2", "bmi2", "avx_vnni"}) == "alderlake"
    skylake = {"sse4_2", "avx", "f16c", "fma", "avx2", "bmi2", *_FEATURES["AVX512"][0]}
    assert best_variant(skylake) == "skylakex"
    sapphire_rapids = skylake | {"avx512vbmi", "avx512_vnni", "avx512_bf16", "amx_int8", "amx_tile"}
    assert best_variant(sapphire_rapids) == "zen4"  # AMX's own variant is not built
    assert best_variant(set()) == "x64"


def test_the_image_has_every_cpu_variant_and_loads_the_best_for_this_cpu(image: str) -> None:
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    flags = set(next(line for line in cpuinfo if line.startswith("flags")).split())
    expected = best_variant(flags)
    started = containers.Container(image, LLM_BATCH_INVARIANT="1", LLM_PARALLEL="4", LLM_N_THREADS="2")
    try:
        started.wait_ready()
        listing = started.execute("sh", "-c", "ls /opt/llm/lib/python3*/site-packages/llama_cpp/lib/")
        modules = {
            name[len("libggml-cpu-") : -len(".so")]
            for name in listing.split()
            if name.startswith("libggml-cpu-")
        }
        assert modules == set(_VARIANTS), listing
        props = httpx.get(started.url + "/props", timeout=10).json()
        assert props["cpu_variant"] == expected, (props["cpu_variant"], expected)
        assert f"CPU kernels: llama.cpp's {expected} variant" in started.output()
        # The reproducible mode holds in the image: the batch-invariant patch is in every variant.
        assert props["batch_invariant"] is True
        prompt = "The three primary colours are"
        (alone,) = complete(started.url, prompt, 24)
        others = [
            RawStream(started.port, {"prompt": f"Story {i}: once", "max_tokens": 400, "ignore_eos": True,
                                     "stream": True}).started()
            for i in range(3)
        ]  # fmt: skip
        (beside,) = complete(started.url, prompt, 24)
        # 24 steps of the batch against the others' 400: they were all decoding beside it.
        slots = httpx.get(started.url + "/slots", timeout=10).json()
        assert sum(slot["is_processing"] for slot in slots) == 3, slots
        assert all(finish_reason(stream.rest()) == "length" for stream in others)
        assert (beside.tokens, beside.top) == (alone.tokens, alone.top)
    finally:
        log = started.output()
        started.stop()
    assert_clean(log)
