"""Benchmark: this server against raw llama-cpp-python and llama-cpp-python's own server, in one run.

    python -m bench.run --repeats 5 --markdown docs/benchmarks.md --chart docs/concurrency.png

Everything runs on loopback with the same model, context, threads, seed, prompt and
max_tokens; figures are medians of repeated runs with their range.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.config import default_model_path
from bench import measure, services


def spread(values: list[float], scale: float = 1.0, digits: int = 1) -> str:
    """`median (min–max)` of repeated figures."""
    low, mid, high = min(values) * scale, statistics.median(values) * scale, max(values) * scale
    return f"{mid:.{digits}f} ({low:.{digits}f}–{high:.{digits}f})"


def repeat(times: int, run: Callable[[], Any]) -> list[Any]:
    return [run() for _ in range(times)]


def single_streams(args: argparse.Namespace, model: str) -> dict[str, list[measure.Stream]]:
    """Time to first token and decode speed of one stream, for every target.

    Every server runs for the whole measurement and the repeats are interleaved (raw,
    ours, nginx, peer, then again), so the machine's drift weighs on all of them alike.
    """
    started: list[services.Service] = []
    try:
        server = services.ours(1, args.threads, args.n_ctx)
        started.append(server)
        urls = {"ours, direct": server.url}
        # The peer reuses the KV cache of an identical prompt; ours does on request.
        started.append(services.ours(1, args.threads, args.n_ctx, LLM_PROMPT_CACHE="1"))
        urls["ours, LLM_PROMPT_CACHE=1"] = started[-1].url
        if not args.skip_nginx:
            started.append(services.nginx([server.port]))
            urls["ours, through nginx"] = started[-1].url
        if not args.skip_peer:
            started.append(services.peer(model, args.threads, args.n_ctx))
            urls["peer: llama-cpp-python server"] = started[-1].url
        for url in urls.values():
            measure.single(url, 4, args.seed)  # warm-up
        results: dict[str, list[measure.Stream]] = {"raw llama-cpp-python": [], **{name: [] for name in urls}}
        for _ in range(args.repeats):
            results["raw llama-cpp-python"].append(
                measure.raw(model, args.threads, args.n_ctx, args.max_tokens, args.seed)
            )
            for name, url in urls.items():
                results[name].append(measure.single(url, args.max_tokens, args.seed))
        return results
    finally:
        for service in reversed(started):
            service.stop()


def sweeps(args: argparse.Namespace, model: str) -> dict[str, list[measure.Sweep]]:
    """Median figures over repeats for each number of concurrent clients."""
    targets = {
        f"ours, {args.workers} workers": lambda: services.ours(
            args.workers, max(1, (os.cpu_count() or 1) // args.workers), args.n_ctx
        )
    }
    if not args.skip_peer:
        targets["peer"] = lambda: services.peer(model, args.threads, args.n_ctx)
    results: dict[str, list[measure.Sweep]] = {}
    for name, start in targets.items():
        service = start()
        try:
            measure.single(service.url, 4, args.seed)
            results[name] = []
            for clients in args.clients:
                runs = repeat(
                    args.repeats,
                    lambda c=clients, url=service.url: measure.sweep(
                        url, c, args.per_client, args.max_tokens
                    ),
                )
                results[name].append(
                    measure.Sweep(
                        clients,
                        statistics.median(r.tokens_per_second for r in runs),
                        statistics.median(r.ttft_p50 for r in runs),
                        statistics.median(r.ttft_p99 for r in runs),
                        max(r.rejected for r in runs),
                        max(r.failed for r in runs),
                    )
                )
        finally:
            service.stop()
    return results


def memory(args: argparse.Namespace) -> dict[int, tuple[list[int], int, int]]:
    """Per-worker RSS and total PSS of ours with 1 and 2 workers, once loaded and warm."""
    figures = {}
    for workers in (1, 2):
        service = services.ours(workers, max(1, args.threads // workers), args.n_ctx)
        try:
            for _ in range(2 * workers):
                measure.single(service.url, 4, args.seed)
            figures[workers] = measure.memory_kib(service.pids()[1:])
        finally:
            service.stop()
    return figures


def chart(path: Path, results: dict[str, list[measure.Sweep]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for name, points in results.items():
        clients = [p.clients for p in points]
        left.plot(clients, [p.tokens_per_second for p in points], marker="o", label=name)
        right.plot(clients, [p.ttft_p50 * 1000 for p in points], marker="o", label=f"{name} p50")
        right.plot(
            clients, [p.ttft_p99 * 1000 for p in points], marker="x", linestyle="--", label=f"{name} p99"
        )
    left.set(title="Aggregate throughput", xlabel="concurrent clients", ylabel="tokens/s")
    right.set(title="Time to first token", xlabel="concurrent clients", ylabel="ms", yscale="log")
    for axis in (left, right):
        axis.set_xticks(clients)
        axis.legend(fontsize=7)
        axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def report(
    args: argparse.Namespace,
    model: str,
    streams: dict[str, list[measure.Stream]],
    concurrency: dict[str, list[measure.Sweep]],
    mem: dict[int, tuple[list[int], int]] | None,
) -> str:
    raw = streams["raw llama-cpp-python"]
    raw_ttft = statistics.median(s.ttft for s in raw)
    raw_tps = statistics.median(s.tokens_per_second for s in raw)
    lines = [
        f"Model `{Path(model).name}`, context {args.n_ctx}, {args.threads} threads, seed {args.seed}, "
        f"prompt {measure.PROMPT!r}, max_tokens {args.max_tokens}; medians of {args.repeats} runs "
        "(range in brackets). Machine: "
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}.",
        "",
        "### One stream",
        "",
        "| target | time to first token, ms | decode tokens/s | TTFT minus raw, ms | tokens/s vs raw |",
        "|---|---|---|---|---|",
    ]
    for name, runs in streams.items():
        ttft = statistics.median(s.ttft for s in runs)
        tps = statistics.median(s.tokens_per_second for s in runs)
        lines.append(
            f"| {name} | {spread([s.ttft for s in runs], 1000)} | "
            f"{spread([s.tokens_per_second for s in runs])} | {1000 * (ttft - raw_ttft):+.1f} | "
            f"{100 * tps / raw_tps:.1f}% |"
        )
    lines += [
        "",
        f"### Concurrency ({args.per_client} streams per client)",
        "",
        "| server | clients | aggregate tokens/s | TTFT p50, ms | TTFT p99, ms | rejected | failed |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, points in concurrency.items():
        for p in points:
            lines.append(
                f"| {name} | {p.clients} | {p.tokens_per_second:.1f} | {1000 * p.ttft_p50:.0f} | "
                f"{1000 * p.ttft_p99:.0f} | {p.rejected} | {p.failed} |"
            )
    if mem:
        weights = Path(model).stat().st_size // 1024
        lines += [
            "",
            "### Memory (KiB)",
            "",
            "| workers | RSS per worker | total PSS | PSS of the mmapped weights |",
            "|---|---|---|---|",
        ]
        for workers, (rss, pss, weights_pss) in mem.items():
            lines.append(f"| {workers} | {', '.join(map(str, rss))} | {pss} | {weights_pss} |")
        if 1 in mem and 2 in mem:
            added = mem[2][1] - mem[1][1]
            lines.append(f"\nA second worker adds {added} KiB (PSS); the weights file is {weights} KiB.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=default_model_path())
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--clients", type=lambda v: [int(c) for c in v.split(",")], default=[1, 2, 4, 8])
    parser.add_argument("--per-client", type=int, default=2)
    parser.add_argument("--skip-peer", action="store_true")
    parser.add_argument("--skip-nginx", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--chart", type=Path)
    args = parser.parse_args(argv)
    streams = single_streams(args, args.model)
    concurrency = sweeps(args, args.model)
    mem = None if args.skip_memory else memory(args)
    text = report(args, args.model, streams, concurrency, mem)
    sys.stdout.write(text)
    if args.markdown:
        args.markdown.write_text(text)
    if args.chart:
        chart(args.chart, concurrency)
    return 0


if __name__ == "__main__":
    sys.exit(main())
