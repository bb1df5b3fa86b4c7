"""Benchmark: /metrics under an endpoint picker's scraping, at rest and with every sequence generating.

    python -m bench.scrape --repeats 3 --record

The inference gateway's picker scrapes every pod's /metrics each 50 ms. Ours (two
gunicorn workers, their figures summed at each scrape) beside llama-server (`--metrics`),
interleaved: the latency of a scrape at rest and while every sequence of every worker
generates with more requests queued, and the load's decode speed with the picker
scraping and without (what the scrapes cost generation). Ours twice: reading every
worker's counters at each scrape (the default), and with LLM_METRICS_MAX_AGE=1 (the
Kubernetes base's setting: counters up to a second old, the picker's gauges fresh).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from app.settings.values import default_model_path
from bench import references
from bench.run import add_output_options, progress, publish, rotate
from harness import llama_server
from harness.servers import Service

OURS, AGED, CPP = "ours (2 workers)", "ours, LLM_METRICS_MAX_AGE=1", "llama.cpp llama-server"
TICK = 0.05  # the picker's base refresh interval
TARGET_P99 = 0.050  # a scrape must not outlast the picker's tick under full load


def start(args: argparse.Namespace) -> dict[str, Service]:
    started: dict[str, Service] = {}
    try:
        parallel = {"LLM_PARALLEL": str(args.slots // 2)}
        started[OURS] = references.ours(2, 1, args.n_ctx, **parallel)
        started[AGED] = references.ours(2, 1, args.n_ctx, LLM_METRICS_MAX_AGE="1", **parallel)
        started[CPP] = llama_server.start(args.model, 2, args.slots, args.n_ctx, ("--metrics",))
    except BaseException:
        for service in started.values():
            service.stop()
        raise
    return started


def scrape_for(url: str, seconds: float) -> list[float]:
    """Scrape `url`/metrics every tick for `seconds`, as the picker does; each scrape's latency."""
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    with httpx.Client(timeout=10) as client:
        while time.monotonic() < deadline:
            began = time.perf_counter()
            client.get(url + "/metrics").raise_for_status()
            latencies.append(time.perf_counter() - began)
            time.sleep(max(0.0, TICK - (time.perf_counter() - began)))
    return latencies


def load(url: str, requests: int, tokens: int, scraping: bool) -> tuple[list[float], float]:
    """`requests` streams at once (more than the sequences); scrape latencies meanwhile, tokens/s."""
    body = {"prompt": "Once upon a time", "max_tokens": tokens, "ignore_eos": True, "temperature": 0}
    done = threading.Event()
    latencies: list[float] = []

    def scraper() -> None:
        while not done.is_set():
            latencies.extend(scrape_for(url, 0.5))

    began = time.perf_counter()
    with ThreadPoolExecutor(requests + 1) as pool:
        if scraping:
            pool.submit(scraper)
        post = lambda _: httpx.post(url + "/v1/completions", json=body, timeout=600)  # noqa: E731
        answers = list(pool.map(post, range(requests)))
        done.set()
    seconds = time.perf_counter() - began
    generated = sum(a.json()["usage"]["completion_tokens"] for a in answers)
    return latencies, generated / seconds


def quantile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--slots", type=int, default=8, help="sequences in all (ours: half per worker)")
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--tokens", type=int, default=200, help="tokens each loading request generates")
    parser.add_argument("--rest-seconds", type=float, default=5)
    add_output_options(parser)
    parser.add_argument("--model", default=default_model_path())
    args = parser.parse_args(argv)
    servers = start(args)
    rest: dict[str, list[float]] = {name: [] for name in servers}
    busy: dict[str, list[float]] = {name: [] for name in servers}
    speed: dict[tuple[str, bool], list[float]] = {(name, s): [] for name in servers for s in (False, True)}
    try:
        for repeat in range(args.repeats):
            for name in rotate(list(servers), repeat):
                url = servers[name].url
                progress(f"round {repeat + 1}: {name}")
                rest[name] += scrape_for(url, args.rest_seconds)
                for scraping in (repeat % 2 == 0, repeat % 2 == 1):  # which goes first alternates
                    latencies, rate = load(url, args.slots + 4, args.tokens, scraping)
                    busy[name] += latencies
                    speed[(name, scraping)].append(rate)
    finally:
        for service in servers.values():
            service.stop()
    text = report(args, rest, busy, speed)
    publish(text, args)
    return 0


def report(
    args: argparse.Namespace,
    rest: dict[str, list[float]],
    busy: dict[str, list[float]],
    speed: dict[tuple[str, bool], list[float]],
) -> str:
    lines = [
        f"/metrics scraped every {TICK * 1000:.0f} ms; {args.slots} sequences in all, "
        f"{args.slots + 4} requests of {args.tokens} tokens at once; {args.repeats} repeats, interleaved.",
        "",
        "| target | at rest p50 / p99 (ms) | full load p50 / p99 (ms) | scrapes | "
        "decode tok/s, no scraping | with scraping |",
        "|---|---|---|---|---|---|",
    ]
    for name in rest:
        ms = [1000 * quantile(v, q) for v in (rest[name], busy[name]) for q in (0.5, 0.99)]
        plain, scraped = statistics.median(speed[(name, False)]), statistics.median(speed[(name, True)])
        lines.append(
            f"| {name} | {ms[0]:.1f} / {ms[1]:.1f} | {ms[2]:.1f} / {ms[3]:.1f} | "
            f"{len(rest[name]) + len(busy[name])} | {plain:.1f} | {scraped:.1f} |"
        )
    lines += [
        "",
        "| server | p99 under full load, ms | cost of 20 scrapes a second to decoding |",
        "|---|---|---|",
    ]
    judged = []
    for name in rest:
        p99 = quantile(busy[name], 0.99)
        cost = 1 - statistics.median(speed[(name, True)]) / statistics.median(speed[(name, False)])
        lines.append(f"| {name} | {p99 * 1000:.1f} | {cost * 100:+.1f} % (below 0: noise) |")
        if name != CPP:
            verdict = "met" if p99 <= TARGET_P99 else "missed"
            judged.append(f"| {name}: p99 under full load within the picker's tick "
                          f"({TARGET_P99 * 1000:.0f} ms) | {p99 * 1000:.1f} ms | {verdict} |")  # fmt: skip
    lines += ["", "### Targets", "", "| target | measured | verdict |", "|---|---|---|", *judged]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
