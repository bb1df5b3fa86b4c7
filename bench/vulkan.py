"""Ours with every layer on a Vulkan device (Mesa's lavapipe) beside ours on the CPU: build, load, speed.

    make test-gpu && .venv/bin/python -m bench.vulkan --record

lavapipe is a Vulkan driver that runs on the CPU, so these figures are not a GPU's: the run
records that the offload path works end to end here (what `make test-gpu` checks), what
building llama.cpp's Vulkan backend took on this machine, and how far lavapipe's kernels are
from the CPU backend's on the same cores. No target: nothing here is a speed claim.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
from pathlib import Path

import httpx

from bench import measure
from bench.run import add_output_options, progress, publish, rotate
from harness.servers import ROOT, Server

GPU = ROOT / ".venv" / "gpu"
VULKAN = {"GGML_VK_VISIBLE_DEVICES": "0", "LLM_N_GPU_LAYERS": "99"}  # lavapipe, named: a CPU-type device
CPU, OFFLOADED = "ours, CPU backend", "ours, every layer on lavapipe (Vulkan)"


def build_seconds() -> int | None:
    """What building the Vulkan wheel took (deploy/llama-cpp/wheel.sh keeps it beside the wheel)."""
    folder = subprocess.run(
        ["bash", "deploy/llama-cpp/wheel.sh", str(GPU / "bin" / "python")],
        cwd=ROOT, env={**os.environ, "LLAMA_CMAKE_ARGS": "-DGGML_VULKAN=ON"},
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    kept = Path(folder) / "build-seconds"
    return int(kept.read_text()) if kept.exists() else None


def loaded_in(server: Server) -> float:
    """The model's load, as its start-up line says it ("loaded in 0.31s")."""
    return float(re.findall(r"loaded in ([\d.]+)s", server.output())[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=64)
    add_output_options(parser)
    args = parser.parse_args(argv)
    assert (GPU / "bin" / "gunicorn").exists(), "make test-gpu builds .venv/gpu first"
    threads = str(args.threads)
    servers = {
        CPU: Server(LLM_N_THREADS=threads).wait_ready(),
        OFFLOADED: Server(gunicorn=GPU / "bin" / "gunicorn", LLM_N_THREADS=threads, **VULKAN).wait_ready(
            timeout=600
        ),
    }
    results: dict[str, list[measure.Stream]] = {name: [] for name in servers}
    try:
        offload = httpx.get(servers[OFFLOADED].url + "/props", timeout=30).json()["offload"]
        index = 0
        for turn in range(args.repeats):
            for name in rotate(list(servers), turn):
                progress(f"round {turn + 1}: {name}")
                index += 1
                results[name].append(measure.single(servers[name].url, args.max_tokens, index))
        loads = {name: loaded_in(server) for name, server in servers.items()}
    finally:
        for server in servers.values():
            server.stop()
    publish(report(args, results, loads, offload, build_seconds()), args)
    return 0


def report(
    args: argparse.Namespace,
    results: dict[str, list[measure.Stream]],
    loads: dict[str, float],
    offload: dict[str, object],
    built: int | None,
) -> str:
    lines = [
        f"SmolLM2-135M Q4_1, {args.threads} threads, one stream of {args.max_tokens} tokens at a time; "
        f"{args.repeats} repeats, interleaved. Offloaded: {offload}. llama-cpp-python with "
        f"-DGGML_VULKAN=ON took {f'{built / 60:.0f} minutes' if built else 'an unrecorded time'} "
        "to build on this machine.",
        "",
        "| target | model load (s) | TTFT p50 (ms) | decode (tokens/s) |",
        "|---|---|---|---|",
    ]
    for name, runs in results.items():
        ttft = statistics.median(run.ttft for run in runs) * 1000
        speed = statistics.median(run.tokens_per_second for run in runs)
        lines.append(f"| {name} | {loads[name]:.2f} | {ttft:.0f} | {speed:.1f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
