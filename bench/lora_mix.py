"""Benchmark: what mixing LoRA adapters costs, on ours and on llama-server, side by side.

    python -m bench.lora_mix --repeats 3 --record

One worker of 4 sequences (llama-server: 4 slots), 2 threads, the default model with two
small random-weight adapters (harness/tiny_lora.py). Four clients, each sending
requests one after another (a short prompt, 64 tokens, greedy, past end-of-text), under
four mixes, interleaved in a rotating order:

- base: no adapter;
- one adapter: all four clients with adapter a;
- two sets: two clients on the base model, two with adapter a;
- four sets: base, a, b, and a and b at half scale, one client each.

llama.cpp applies adapters to a whole context, so both servers decode one set of
scales per step: mixing trades batch width for steps. The figure is the aggregate
tokens per second, and each mix's share of the same server's all-base figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from app.settings.values import default_model_path
from bench import references
from bench.run import add_output_options, progress, publish, rotate
from harness import llama_server, tiny_lora
from harness.servers import Service

A, B = {"id": 0, "scale": 1.0}, {"id": 1, "scale": 1.0}
MIXES: dict[str, list[list[dict[str, Any]]]] = {
    "base": [[], [], [], []],
    "one adapter": [[A], [A], [A], [A]],
    "two sets": [[], [], [A], [A]],
    "four sets": [[], [A], [B], [{"id": 0, "scale": 0.5}, {"id": 1, "scale": 0.5}]],
}
TARGET_SHARE = 0.9  # ours at least this share of llama-server's tokens per second, in each mix


def clients(url: str, mix: list[list[dict[str, Any]]], requests: int, tokens: int, seed: int) -> float:
    """Run one client per entry of `mix`, each sending `requests` requests; aggregate tokens per second."""
    generated = [0] * len(mix)

    def client(n: int) -> None:
        with httpx.Client(timeout=600) as http:
            for r in range(requests):
                body = {"prompt": f"Story {seed}-{n}-{r}: once upon a time", "max_tokens": tokens,
                        "temperature": 0, "ignore_eos": True, "lora": mix[n]}  # fmt: skip
                answer = http.post(url + "/v1/completions", json=body)
                assert answer.status_code == 200, answer.text
                generated[n] += answer.json()["usage"]["completion_tokens"]

    threads = [threading.Thread(target=client, args=(n,)) for n in range(len(mix))]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(generated) / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    llama_server.build_option(parser)
    parser.add_argument("--requests", type=int, default=4, help="requests per client and run")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=1024)
    add_output_options(parser)
    parser.add_argument("--model", default=default_model_path())
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="bench-lora-"))
    paths = [
        tiny_lora.write(folder / "a.gguf", args.model),
        tiny_lora.write(folder / "b.gguf", args.model, seed=1),
    ]
    loras = [{"id": name, "path": str(path), "scale": 0} for name, path in zip("ab", paths, strict=True)]
    models = [{"id": "smol", "path": args.model, "parallel": 4, "loras": loras}]
    ours = references.ours(1, args.threads, args.n_ctx, LLM_MODELS=json.dumps(models))
    cpp: Service | None = None
    results: dict[tuple[str, str], list[float]] = {}
    try:
        extra = ("--lora-init-without-apply", *(flag for path in paths for flag in ("--lora", str(path))))
        cpp = llama_server.start(
            args.model, args.threads, 4, args.n_ctx, extra, stock=args.llama_server == "stock"
        )
        runs = [(target, mix) for mix in MIXES for target in ("ours", "llama-server")]
        seed = 0
        for repeat in range(args.repeats):
            for target, mix in rotate(runs, repeat):
                progress(f"round {repeat + 1}: {target}, {mix}")
                seed += 1  # new prompts: nothing read from another run's cache
                url = ours.url if target == "ours" else cpp.url
                results.setdefault((target, mix), []).append(
                    clients(url, MIXES[mix], args.requests, args.tokens, seed)
                )
    finally:
        ours.stop()
        if cpp is not None:
            cpp.stop()
    text = report(args, results)
    publish(text, args)
    return 0


def report(args: argparse.Namespace, results: dict[tuple[str, str], list[float]]) -> str:
    median = {key: statistics.median(values) for key, values in results.items()}
    lines = [
        f"One worker of 4 sequences, {args.threads} threads; four clients, {args.requests} requests each of "
        f"{args.tokens} tokens per run; {args.repeats} repeats, interleaved. Tokens per second, all clients "
        "together (median of the repeats), and the share of the same server's all-base figure.",
        "",
        "| mix | ours (tok/s) | share of ours' base | llama-server (tok/s) | share of its base "
        "| ours / llama-server |",
        "|---|---|---|---|---|---|",
    ]
    for mix in MIXES:
        ours, cpp = median[("ours", mix)], median[("llama-server", mix)]
        lines.append(
            f"| {mix} | {ours:.1f} | {ours / median[('ours', 'base')]:.0%} | {cpp:.1f} | "
            f"{cpp / median[('llama-server', 'base')]:.0%} | {ours / cpp:.0%} |"
        )
    lines += ["", "### Targets", "", "| target | measured | verdict |", "|---|---|---|"]
    for mix in MIXES:
        share = median[("ours", mix)] / median[("llama-server", mix)]
        lines.append(
            f"| {mix}: ours at least {TARGET_SHARE:.0%} of llama-server's tokens/s | {share:.1%} | "
            f"{'met' if share >= TARGET_SHARE else 'missed'} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
