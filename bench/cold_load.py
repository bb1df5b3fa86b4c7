"""Benchmark: time to first token for a model loaded on demand, cold and warm, against llama-server's router.

    python -m bench.cold_load --repeats 5 --record

Ours: one pinned worker and one on-demand pool worker; two on-demand entries (the same
GGUF under two ids). Timed, interleaved in a rotating order, each a streamed chat
request's time to first token as the client sees it:

- cold: the model is unloaded (and the pool worker holds none), so the request loads it;
- swap: the pool worker holds the other on-demand model, idle, which it unloads first;
- warm: the model is loaded.

llama-server in router mode (`--models-dir`, `--models-max 1`: each model a child
process) is timed cold (after its `/models/unload`) and warm, and llama.cpp's own load
time (llama-cpp-python's `Llama(...)` in a fresh process) is measured beside, the floor
any server's cold start stands on.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from app.settings.values import default_model_path
from bench.run import add_output_options, progress, publish, rotate
from harness import llama_server
from harness.servers import Server, Service, free_port

COLD, SWAP, WARM = "cold", "swap (evict the other, load)", "warm"
TARGET_RATIO = 1.5  # our cold TTFT at most this many times llama-server router's
SETTLE = 1.2  # seconds a model must idle before the pool worker may evict it (model_holder.SETTLE + margin)


def ttft(url: str, model: str, seed: int) -> float:
    """One streamed chat request's time to its first content token, in seconds."""
    body = {"model": model, "messages": [{"role": "user", "content": f"Say hello ({seed})."}],
            "max_tokens": 4, "stream": True, "temperature": 0}  # fmt: skip
    started = time.perf_counter()
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=600) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: {"):
                delta = (json.loads(line[6:])["choices"] or [{}])[0].get("delta", {})
                if delta.get("content"):
                    return time.perf_counter() - started
    raise AssertionError("no content in the stream")


def state(listing: str, model: str) -> str:
    """The model's state as the server's list says it (ours: /v1/models; llama-server: /models)."""
    listed = httpx.get(listing, timeout=30).json()
    return next(m["status"]["value"] for m in listed["data"] if m["id"] == model)


def wait_state(listing: str, model: str, wanted: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while state(listing, model) != wanted:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{model} not {wanted} within {timeout}s")
        time.sleep(0.05)


def unload(url: str, model: str, timeout: float = 60) -> None:
    """Unload `model`, once its last request (cancelled when its client read its first token) is over."""
    deadline = time.monotonic() + timeout
    while (answer := httpx.post(f"{url}/models/unload", json={"model": model})).status_code == 409:
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    answer.raise_for_status()


def ours_once(url: str, condition: str, seed: int) -> float:
    """Set the pool worker up for `condition`, then time a request for od-a."""
    if condition == WARM:
        ttft(url, "od-a", seed - 1)  # loaded (and its idle clock fresh)
    else:
        unload(url, "od-a")
        wait_state(url + "/v1/models", "od-a", "unloaded")
        if condition == SWAP:
            ttft(url, "od-b", seed - 1)
            time.sleep(SETTLE)  # a model just used is not evicted (it may have requests on the way)
        else:
            unload(url, "od-b")
            wait_state(url + "/v1/models", "od-b", "unloaded")
    return ttft(url, "od-a", seed)


def router_once(url: str, condition: str, seed: int) -> float:
    if condition == WARM:
        ttft(url, "smol", seed - 1)
    elif state(url + "/models", "smol") != "unloaded":  # llama-server refuses to unload an unloaded one
        unload(url, "smol")
        wait_state(url + "/models", "smol", "unloaded")
    return ttft(url, "smol", seed)


def raw_load(model: str, threads: int, n_ctx: int) -> float:
    """llama.cpp's own load time through llama-cpp-python, in a fresh process (seconds)."""
    code = (
        "import time, llama_cpp; started = time.perf_counter(); "
        f"llama_cpp.Llama({model!r}, n_ctx={n_ctx}, n_threads={threads}, verbose=False); "
        "print(time.perf_counter() - started)"
    )
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(done.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    llama_server.build_option(parser)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=2048)
    add_output_options(parser)
    parser.add_argument("--model", default=default_model_path())
    args = parser.parse_args(argv)
    entry = {"path": args.model, "load": "on_demand", "n_ctx": args.n_ctx, "parallel": 1}
    models = [
        {"id": "pinned", "path": args.model, "workers": 1, "n_ctx": args.n_ctx, "parallel": 1},
        {"id": "od-a", **entry},
        {"id": "od-b", **entry},
    ]
    env = {"LLM_MODELS": json.dumps(models), "LLM_N_THREADS": str(args.threads), "LLM_QUEUE_TIMEOUT": "600"}
    folder = Path(tempfile.mkdtemp(prefix="bench-router-"))
    (folder / "smol.gguf").symlink_to(args.model)
    ours = Server(**env).wait_ready(timeout=120, answers=6)
    port = free_port()
    binary = llama_server.named(args.llama_server == "stock")
    router = Service(
        [str(binary), "--models-dir", str(folder), "--models-max", "1",
         "--host", "127.0.0.1", "--port", str(port), "--threads", str(args.threads),
         "--ctx-size", str(args.n_ctx), "--no-webui"],
        port,
    ).wait_ready("/health")  # fmt: skip
    results: dict[tuple[str, str], list[float]] = {}
    runs = [("ours", COLD), ("ours", SWAP), ("ours", WARM), ("llama-server router", COLD),
            ("llama-server router", WARM), ("llama.cpp load (llama-cpp-python)", COLD)]  # fmt: skip
    try:
        seed = 0
        for repeat in range(args.repeats):
            for target, condition in rotate(runs, repeat):
                progress(f"round {repeat + 1}: {target}, {condition}")
                seed += 10
                if target == "ours":
                    value = ours_once(ours.url, condition, seed)
                elif target.startswith("llama-server"):
                    value = router_once(router.url, condition, seed)
                else:
                    value = raw_load(args.model, args.threads, args.n_ctx)
                results.setdefault((target, condition), []).append(value)
    finally:
        ours.stop()
        router.stop()
    text = report(args, results)
    publish(text, args)
    return 0


def report(args: argparse.Namespace, results: dict[tuple[str, str], list[float]]) -> str:
    lines = [
        f"SmolLM2-135M Q4_1, {args.threads} threads, a {args.n_ctx}-token context, one sequence; "
        f"streamed chat requests of 4 tokens; {args.repeats} repeats, interleaved.",
        "",
        "| target | condition | TTFT p50 (ms) | min (ms) | max (ms) | runs |",
        "|---|---|---|---|---|---|",
    ]
    for (target, condition), values in results.items():
        shown = "load time" if target.startswith("llama.cpp") else condition
        lines.append(
            f"| {target} | {shown} | {statistics.median(values) * 1000:.0f} | {min(values) * 1000:.0f} | "
            f"{max(values) * 1000:.0f} | {len(values)} |"
        )
    ours_cold = statistics.median(results[("ours", COLD)])
    router_cold = statistics.median(results[("llama-server router", COLD)])
    ours_warm = statistics.median(results[("ours", WARM)])
    load = statistics.median(results[("llama.cpp load (llama-cpp-python)", COLD)])
    ratio = ours_cold / router_cold
    overhead = ours_cold - ours_warm - load
    lines += [
        "",
        "### Targets",
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
        f"| cold TTFT at most {TARGET_RATIO}× llama-server router's | {ratio:.2f}× "
        f"({ours_cold * 1000:.0f} vs {router_cold * 1000:.0f} ms) | "
        f"{'met' if ratio <= TARGET_RATIO else 'missed'} |",
        f"| a cold load costs at most 250 ms beyond llama.cpp's own load | {overhead * 1000:.0f} ms "
        f"(cold {ours_cold * 1000:.0f} − warm {ours_warm * 1000:.0f} − load {load * 1000:.0f}) | "
        f"{'met' if overhead <= 0.25 else 'missed'} |",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
