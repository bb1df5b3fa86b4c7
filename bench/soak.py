"""Soak: a bounded run of mixed traffic against a server it starts on loopback, watching each worker drift.

Streamed and whole chat and completions, clients hanging up early, invalid requests, and
a key over its limit, for a fixed number of requests (and never longer than --max-seconds).
It samples each worker's RSS, open file descriptors, greenlets and busy sequences, then
checks that nothing leaked once the traffic stops: no 5xx, no worker restarted, every
sequence and every key's place free, descriptors and greenlets back to where they were at
rest before it. Rest is waited for, never sampled once: a worker counts its greenlets
every few seconds, so a count serves as the baseline (or the end) only once it was taken
after the server became ready (or after the traffic stopped). Usage:

    python -m bench.soak --requests 10000 --record --chart bench/results/soak-rss.png
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.run import add_output_options, publish
from harness.servers import Server

KEYS = "soak sk-soak-main\npair sk-soak-pair concurrency=2\ntight sk-soak-tight rpm=5\n"


@dataclass
class Sample:
    """One look at one worker."""

    seconds: float
    rss_mb: float
    fds: int
    greenlets: int
    greenlets_counted_at: float  # when the worker counted them (Unix time)
    running: int


@dataclass
class Soak:
    """What a run saw: answers by status, and each worker's samples."""

    requests: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    samples: dict[int, list[Sample]] = field(default_factory=dict)
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)


def _proc(pid: int) -> tuple[float, int]:
    """RSS in MiB, and open descriptors other than the files a worker opens once on first use
    and keeps: prometheus_client's (one per kind of metric) and the key limits' lock."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    fds = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            fds += not os.readlink(f"/proc/{pid}/fd/{fd}").endswith((".db", ".lock"))
        except OSError:  # closed meanwhile
            pass
    return rss_kb / 1024, fds


def descriptors(pid: int) -> list[str]:
    """What a worker's descriptors point to, to tell a leak apart."""
    found = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return sorted(found)


def sample(server: Server, started: float, soak: Soak) -> dict[int, Sample]:
    """RSS and descriptors from /proc, greenlets and busy sequences from /health/workers."""
    figures = {w["pid"]: w for w in httpx.get(server.url + "/health/workers", timeout=30).json()["data"]}
    taken = {}
    for pid, worker in figures.items():
        rss, fds = _proc(pid)
        seconds = round(time.monotonic() - started, 2)
        counted_at = worker["greenlets_counted_at"]
        taken[pid] = Sample(seconds, rss, fds, worker["greenlets"], counted_at, worker["running"])
        soak.samples.setdefault(pid, []).append(taken[pid])
    return taken


def one_request(client: httpx.Client, index: int, rng: random.Random) -> str:
    """One request of the mix; its outcome as a status (or `hung-up`)."""
    kind = rng.random()
    key = "sk-soak-main"
    ask = [{"role": "user", "content": f"Say a word about {index}."}]
    chat = {"messages": ask, "max_tokens": rng.randint(1, 16)}
    text = {"prompt": f"Item {index}:", "max_tokens": rng.randint(1, 16), "temperature": 0.7}
    path, body = ("/v1/chat/completions", chat) if kind < 0.55 else ("/v1/completions", text)
    streamed = rng.random() < 0.5
    if kind >= 0.85:
        key = "sk-soak-tight"  # over its 5 a minute, soon
    if 0.80 <= kind < 0.85:
        body = {"messages": "not a list", "max_tokens": -1}  # invalid: a 400
    if 0.70 <= kind < 0.80:  # hangs up after the first event
        key, body, streamed = "sk-soak-pair", {**text, "max_tokens": 200}, True
        headers = {"Authorization": f"Bearer {key}"}
        with client.stream("POST", path, json={**body, "stream": True}, headers=headers) as answer:
            for line in answer.iter_lines():
                if line.startswith("data: "):
                    break
            return "hung-up" if answer.status_code == 200 else str(answer.status_code)
    answer = client.post(path, json={**body, "stream": streamed}, headers={"Authorization": f"Bearer {key}"})
    return str(answer.status_code)


def run(requests: int, clients: int = 6, max_seconds: float = 3600, interval: float = 2.0) -> Soak:
    """Start a two-worker server, run the mix, sample, and check for leaks at rest."""
    with tempfile.TemporaryDirectory(prefix="soak-") as folder:
        keys = Path(folder) / "keys"
        keys.write_text(KEYS)
        return _run(keys, requests, clients, max_seconds, interval)


def _run(keys: Path, requests: int, clients: int, max_seconds: float, interval: float) -> Soak:
    server = Server(LLM_WORKERS="2", LLM_N_THREADS="1", LLM_API_KEYS_FILE=str(keys), LLM_MAX_QUEUE="64")
    server.wait_ready(timeout=120)
    soak = Soak(requests=requests)
    try:
        started = time.monotonic()
        baseline = at_rest(server, started, soak, since=time.time())
        stop = threading.Event()

        def sampler() -> None:
            while not stop.wait(interval):
                sample(server, started, soak)

        threading.Thread(target=sampler, daemon=True).start()
        deadline = started + max_seconds
        counter = iter(range(requests))
        lock = threading.Lock()

        def client_loop(seed: int) -> Counter[str]:
            rng, seen = random.Random(seed), Counter[str]()
            with httpx.Client(base_url=server.url, timeout=120) as client:
                while time.monotonic() < deadline:
                    with lock:
                        index = next(counter, None)
                    if index is None:
                        break
                    try:
                        seen[one_request(client, index, rng)] += 1
                    except httpx.HTTPError as exc:
                        seen[f"error: {type(exc).__name__}"] += 1
            return seen

        with ThreadPoolExecutor(clients) as pool:
            for seen in pool.map(client_loop, range(clients)):
                soak.statuses.update(seen)
        soak.seconds = round(time.monotonic() - started, 1)
        stop.set()
        check_at_rest(server, started, soak, baseline)
    finally:
        server.stop()
    return soak


def at_rest(
    server: Server, started: float, soak: Soak, since: float, baseline: dict[int, Sample] | None = None
) -> dict[int, Sample]:
    """Each worker's figures once it has counted its greenlets after `since` (Unix time), with
    nothing running; given a `baseline`, once they are back to it too (or after a minute)."""
    deadline = time.monotonic() + 60
    while True:
        now = sample(server, started, soak)
        settled = all(s.greenlets_counted_at > since and s.running == 0 for s in now.values())
        if baseline is not None:
            settled = settled and set(now) == set(baseline)
            settled = settled and all(
                now[pid].fds <= baseline[pid].fds and now[pid].greenlets <= baseline[pid].greenlets
                for pid in now
            )
        if settled or time.monotonic() > deadline:
            return now
        time.sleep(0.5)


def check_at_rest(server: Server, started: float, soak: Soak, baseline: dict[int, Sample]) -> None:
    """Once the traffic stops: no worker restarted, nothing busy, descriptors back, the pair key free."""
    bad = {s: n for s, n in soak.statuses.items() if s.startswith("5") or s.startswith("error")}
    if bad:
        soak.problems.append(f"server errors or broken connections: {bad}")
    now = at_rest(server, started, soak, since=time.time(), baseline=baseline)
    if set(now) != set(baseline):
        soak.problems.append(f"workers changed (a crash?): {sorted(baseline)} -> {sorted(now)}")
    for pid in set(now) & set(baseline):
        if now[pid].running:
            soak.problems.append(f"worker {pid} still holds {now[pid].running} sequences")
        if now[pid].greenlets > baseline[pid].greenlets:
            greenlets = (now[pid].greenlets, baseline[pid].greenlets)
            soak.problems.append(f"worker {pid}: %d greenlets, %d before" % greenlets)
        if now[pid].fds > baseline[pid].fds:
            soak.problems.append(
                f"worker {pid}: {now[pid].fds} descriptors, {baseline[pid].fds} before: {descriptors(pid)}"
            )
    # The pair key's two places: both free again after all those hang-ups.
    pair = {"Authorization": "Bearer sk-soak-pair"}
    body = {"prompt": "1, 2,", "max_tokens": 40, "stream": True}
    with httpx.Client(base_url=server.url, timeout=60) as client:
        with client.stream("POST", "/v1/completions", json=body, headers=pair) as first:
            second = httpx.post(server.url + "/v1/completions", json={**body, "stream": False}, headers=pair)
            both = (first.status_code, second.status_code)
            if both != (200, 200):
                soak.problems.append(f"the pair key's places leaked: {both}")


def report(soak: Soak) -> dict[str, Any]:
    """Each worker's drift from its first sample to its last, and the run's outcome."""
    workers = {}
    for pid, samples in soak.samples.items():
        first, last = samples[0], samples[-1]
        workers[str(pid)] = {
            "rss_mb": [round(x, 1) for x in (first.rss_mb, last.rss_mb, max(s.rss_mb for s in samples))],
            "fds": [first.fds, last.fds, max(s.fds for s in samples)],
            "greenlets": [first.greenlets, last.greenlets, max(s.greenlets for s in samples)],
            "busy_max": max(s.running for s in samples),
            "samples": len(samples),
        }
    return {
        "requests": soak.requests,
        "seconds": soak.seconds,
        "requests_per_second": round(soak.requests / soak.seconds, 1) if soak.seconds else None,
        "statuses": dict(sorted(soak.statuses.items())),
        "workers (start, end, max)": workers,
        "problems": soak.problems,
    }


def markdown(figures: dict[str, Any]) -> str:
    """The report's figures as tables, its one target (nothing leaked) met or missed."""
    workers = list(figures["workers (start, end, max)"].values())
    columns = " | ".join(f"worker {n}" for n in range(1, len(workers) + 1))
    lines = [
        f"{figures['requests']:,} requests in {figures['seconds']:.0f} s "
        f"({figures['requests_per_second']} a second), from one server of {len(workers)} workers.",
        "",
        "| answer | requests |",
        "|---|---|",
        *(f"| {status} | {count:,} |" for status, count in figures["statuses"].items()),
        "",
        f"| | {columns} |",
        "|---" * (len(workers) + 1) + "|",
    ]
    for label, key in (("RSS at the start, the end, the most (MiB)", "rss_mb"),
                       ("descriptors at the start, the end, the most", "fds"),
                       ("greenlets at the start, the end, the most", "greenlets")):  # fmt: skip
        lines.append(f"| {label} | " + " | ".join(", ".join(map(str, w[key])) for w in workers) + " |")
    lines.append("| most sequences busy at once | " + " | ".join(str(w["busy_max"]) for w in workers) + " |")
    problems = figures["problems"]
    lines += [
        "",
        "### Targets",
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
        "| no 5xx, no worker restarted, nothing held or leaked at rest | "
        + ("; ".join(problems) if problems else "nothing found")
        + f" | {'missed' if problems else 'met'} |",
    ]
    return "\n".join(lines) + "\n"


def chart(soak: Soak, path: str) -> None:
    """RSS of each worker over the run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 3.5))
    for index, samples in enumerate(soak.samples.values()):
        axes.plot([s.seconds for s in samples], [s.rss_mb for s in samples], label=f"worker {index + 1}")
    axes.set_xlabel("seconds")
    axes.set_ylabel("RSS (MiB)")
    axes.set_ylim(bottom=0)
    axes.set_title(f"Soak: {soak.requests} requests, RSS per worker")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--max-seconds", type=float, default=3600)
    parser.add_argument("--chart", help="write the RSS chart here (PNG)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead")
    add_output_options(parser)
    args = parser.parse_args()
    soak = run(args.requests, args.clients, args.max_seconds)
    if args.json:
        print(json.dumps(report(soak), indent=2))
    else:
        publish(markdown(report(soak)), args)
    if args.chart:
        chart(soak, args.chart)
    raise SystemExit(1 if soak.problems else 0)


if __name__ == "__main__":
    main()
