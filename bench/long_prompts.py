"""Benchmark: long prompts' evaluation, ours beside a stock llama-server, one request at a time.

    python -m bench.long_prompts --repeats 3 --record

For each model (SmolLM2 and Gemma 3 270M) and prompt length: ours with its defaults (llama.cpp's
fastest kernels), ours with LLM_BATCH_INVARIANT=1 (the reproducible mode's batch-invariant kernels),
and llama-server built as users build it (upstream's default options, AMX off: harness/llama_server.py),
each started once per model with one sequence of a window that holds the prompt, --threads
threads. Every request is a chat prompt of its own from its first word (nothing cached on any
server) answered with one token; repeats interleave the targets. The figure: prompt tokens (as
each server's usage counts them) over the request's wall time, so the template and the one token
weigh alike on all.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

import httpx

from app.settings.values import default_model_path
from bench import references
from bench.run import add_output_options, progress, publish, rotate
from harness import llama_server, real_models
from harness.servers import Service

OURS, REPRO, STOCK = "ours (defaults)", "ours, LLM_BATCH_INVARIANT=1", "llama-server (stock build)"
WORDS = (
    "river stone window garden letter morning paper engine silver market orange thunder "
    "pencil forest ladder candle harbor meadow rocket violin basket mirror island shadow"
).split()


def prompt(index: int, words: int) -> str:
    """Prompt number `index`: its own words from the first one, so no server has any of it cached."""
    rng = random.Random(index)
    return f"Text {index}. " + " ".join(rng.choice(WORDS) for _ in range(words)) + ". Say one word."


def words_for(url: str, tokens: int) -> int:
    """How many words make about `tokens` prompt tokens on this model (ours' /tokenize, one sample)."""
    sample = prompt(0, 400)
    counted = httpx.post(url + "/tokenize", json={"content": sample}, timeout=60).json()["tokens"]
    return int(tokens * 400 / len(counted))


def evaluate(url: str, text: str) -> tuple[int, float]:
    """One request answered with one token: its prompt tokens and the seconds it took."""
    body = {"messages": [{"role": "user", "content": text}], "max_tokens": 1, "temperature": 0}
    started = time.perf_counter()
    answer = httpx.post(url + "/v1/chat/completions", json=body, timeout=1800)
    seconds = time.perf_counter() - started
    answer.raise_for_status()
    return int(answer.json()["usage"]["prompt_tokens"]), seconds


def start(model: str, threads: int, n_ctx: int, stock: bool) -> dict[str, Service]:
    started: dict[str, Service] = {}
    try:
        for name, extra in ((OURS, {}), (REPRO, {"LLM_BATCH_INVARIANT": "1"})):
            started[name] = references.ours(
                1, threads, n_ctx, LLM_PARALLEL="1", LLM_MODEL_PATH=model, LLM_PROMPT_CACHE="0", **extra
            )
        started[STOCK] = llama_server.start(model, threads, 1, n_ctx, stock=stock)
    except BaseException:
        for service in started.values():
            service.stop()
        raise
    return started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lengths", type=lambda v: [int(x) for x in v.split(",")], default=[3000, 8000])
    parser.add_argument("--models", default="smollm2,gemma3", help="smollm2, gemma3 or both")
    parser.add_argument("--model", help="one GGUF instead of --models (a smoke run's)")
    parser.add_argument(
        "--llama-server", choices=("stock", "same-kernels"), default="stock",
        help="stock: built as users build it (for speed); same-kernels: as our wheel (built for the tests)",
    )  # fmt: skip
    add_output_options(parser)
    args = parser.parse_args(argv)
    paths = {"smollm2": ("SmolLM2 135M (Q4_1)", default_model_path()),
             "gemma3": ("Gemma 3 270M (Q4_K_M)", str(real_models.gemma3_path()))}  # fmt: skip
    named = [paths[key] for key in args.models.split(",")]
    chosen = [(Path(args.model).name, args.model)] if args.model else named
    rows: dict[tuple[str, int, str], list[tuple[int, float]]] = {}
    index = 1000
    for label, path in chosen:
        n_ctx = max(args.lengths) + 512
        services = start(path, args.threads, n_ctx, args.llama_server == "stock")
        try:
            for length in args.lengths:
                words = words_for(services[OURS].url, length)
                for repeat in range(args.repeats):
                    for name in rotate(list(services), repeat):
                        index += 1
                        progress(f"{label}, {length} tokens, round {repeat + 1}: {name}")
                        rows.setdefault((label, length, name), []).append(
                            evaluate(services[name].url, prompt(index, words))
                        )
        finally:
            for service in services.values():
                service.stop()
    publish(report(args, rows), args)
    return 0


def report(args: argparse.Namespace, rows: dict[tuple[str, int, str], list[tuple[int, float]]]) -> str:
    build = "stock build" if args.llama_server == "stock" else "as our wheel is built: no speed claim"
    lines = [
        f"One request at a time, {args.threads} threads, {args.repeats} repeats interleaved, medians; "
        "prompt tokens per second of wall time (a chat prompt answered with one token, nothing cached); "
        f"llama-server {build}.",
        "",
        "| model | prompt | target | prompt tokens | tokens/s | × stock llama-server |",
        "|---|---|---|---|---|---|",
    ]
    for (label, length, name), runs in rows.items():
        speed = statistics.median(tokens / seconds for tokens, seconds in runs)
        stock = statistics.median(t / s for t, s in rows[(label, length, STOCK)])
        tokens = statistics.median(tokens for tokens, _ in runs)
        lines.append(f"| {label} | {length:,} | {name} | {tokens:,.0f} | {speed:.0f} | {speed / stock:.2f} |")
    lines += ["", "### Targets", "", "| model | prompt | ours (defaults) ≥ 1.0× llama-server | |"]
    lines.append("|---|---|---|---|")
    for (label, length, name), runs in rows.items():
        if name == OURS:
            ratio = statistics.median(t / s for t, s in runs) / statistics.median(
                t / s for t, s in rows[(label, length, STOCK)]
            )
            verdict = "met" if ratio >= 1.0 else "missed"
            lines.append(f"| {label} | {length:,} | {ratio:.2f}× | {verdict} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
