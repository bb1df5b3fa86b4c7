"""Embedding benchmark: inputs per second, ours beside llama.cpp's C++ server and raw llama-cpp-python.

    python -m bench.embeddings --repeats 3 --record

One client sends requests of 1, 16 or 64 short texts; then several clients each send
one text per request (as a document-ingestion job does). All three use the same model,
pooling (mean), threads and context, unit vectors out; the repeats interleave the
targets. llama-cpp-python's own server is left out: it has no setting for the pooling
type, so on a model whose GGUF names none it answers one vector per token.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import llama_cpp

from app.settings.values import default_model_path
from bench import references
from bench.report import CPP, OURS, RAW, at_least
from bench.run import add_output_options, publish
from harness import llama_server

WORDS = "river stone quiet market engine winter garden signal harbour lantern copper meadow".split()


def texts(count: int, seed: int) -> list[str]:
    """Distinct sentences of 8-16 words, so no server answers from a cache."""
    rng = random.Random(seed)
    return [f"{i}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 16))) for i in range(count)]


_local = threading.local()
_clients: list[httpx.Client] = []


def over_http(url: str, batch: list[str]) -> None:
    # A kept-alive client per thread: a new httpx client costs tens of ms (it loads CA certificates).
    if not hasattr(_local, "client"):
        _local.client = httpx.Client(timeout=120)
        _clients.append(_local.client)
    response = _local.client.post(url + "/v1/embeddings", json={"input": batch, "model": "embed"})
    response.raise_for_status()
    assert len(response.json()["data"]) == len(batch)


def one_client(target: str, url: str | None, raw: llama_cpp.Llama, size: int, total: int, seed: int) -> float:
    """Inputs per second, sending `total` texts in requests of `size` one after the other."""
    inputs = texts(total, seed)
    started = time.perf_counter()
    for start in range(0, total, size):
        batch = inputs[start : start + size]
        if target == RAW:
            assert len(raw.embed(batch, normalize=True)) == len(batch)
        else:
            over_http(url, batch)  # type: ignore[arg-type]  # url is set for every HTTP target
    return total / (time.perf_counter() - started)


def many_clients(url: str, clients: int, total: int, seed: int) -> float:
    """Inputs per second, `clients` clients each sending one text per request."""
    inputs = texts(total, seed)
    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(lambda text: over_http(url, [text]), inputs))
    return total / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=default_model_path())
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--n-ctx", type=int, default=512)
    parser.add_argument("--total", type=int, default=128, help="texts per measurement")
    parser.add_argument("--sizes", type=lambda v: [int(c) for c in v.split(",")], default=[1, 16, 64])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    llama_server.build_option(parser)
    add_output_options(parser)
    args = parser.parse_args(argv)
    spec = [{"id": "embed", "path": args.model, "embedding": True, "pooling": "mean", "n_ctx": args.n_ctx}]
    ours = references.ours(1, args.threads, args.n_ctx, LLM_MODELS=json.dumps(spec), LLM_MAX_QUEUE="256")
    cpp = llama_server.start(
        args.model,
        args.threads,
        args.clients,
        args.n_ctx,
        ("--embeddings", "--pooling", "mean"),
        stock=args.llama_server == "stock",
    )
    raw = llama_cpp.Llama(
        args.model, embedding=True, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN, n_ctx=args.n_ctx,
        n_batch=args.n_ctx, n_threads=args.threads, n_threads_batch=args.threads, verbose=False,
    )  # fmt: skip
    urls = {OURS: ours.url, CPP: cpp.url, RAW: None}
    figures: dict[str, dict[str, list[float]]] = {name: {} for name in urls}
    try:
        for name, url in urls.items():  # warm-up
            one_client(name, url, raw, 4, 8, 0)
        for turn in range(args.repeats):
            order = list(urls)[turn % 3 :] + list(urls)[: turn % 3]
            for size in args.sizes:
                for name in order:
                    seed = 1000 * turn + size
                    rate = one_client(name, urls[name], raw, size, args.total, seed)
                    figures[name].setdefault(f"{size}", []).append(rate)
            for name in (n for n in order if n != RAW):
                rate = many_clients(urls[name], args.clients, args.total, 1000 * turn + 999)  # type: ignore[arg-type]  # HTTP targets only
                figures[name].setdefault(f"{args.clients}x1", []).append(rate)
    finally:
        while _clients:
            _clients.pop().close()
        raw.close()
        ours.stop()
        cpp.stop()
    text = report(args, figures)
    publish(text, args)
    return 0


def report(args: argparse.Namespace, figures: dict[str, dict[str, list[float]]]) -> str:
    columns = [f"{size}" for size in args.sizes] + [f"{args.clients}x1"]
    heads = [f"{size} per request" for size in args.sizes] + [f"{args.clients} clients, 1 each"]
    lines = [
        f"Model `{Path(args.model).name}`, mean pooling, {args.threads} threads, context {args.n_ctx}, "
        f"{args.total} distinct texts of 8-16 words per figure; inputs per second, medians of "
        f"{args.repeats} interleaved runs (range in brackets).",
        "",
        "| target | " + " | ".join(heads) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for name, by_column in figures.items():
        cells = []
        for column in columns:
            runs = by_column.get(column)
            cells.append(f"{statistics.median(runs):.0f} ({min(runs):.0f}–{max(runs):.0f})" if runs else "—")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    median = {name: {c: statistics.median(runs) for c, runs in by.items()} for name, by in figures.items()}
    lines += ["", "### Targets", "", "| target | measured | verdict |", "|---|---|---|"]
    rows = [
        at_least(f"{head}: at least {100 * share:.0f}% of llama-server's", median[OURS][column],
                 median[CPP][column], share, "inputs/s")
        for column, head, share in zip(columns, heads, [0.95] + [1.0] * (len(columns) - 1), strict=True)
    ]  # fmt: skip
    largest = columns[len(args.sizes) - 1]
    rows.append(at_least(f"{heads[len(args.sizes) - 1]}: at least 97% of raw llama-cpp-python",
                         median[OURS][largest], median[RAW][largest], 0.97, "inputs/s"))  # fmt: skip
    lines += [f"| {what} | {measured} | {verdict} |" for what, measured, verdict in rows]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
