"""Load tool: N concurrent streaming clients against a server on loopback, some hanging up early.

Bounded in requests and in time, it stops by itself and reports completed, rejected
(429/503, or a queue-timeout error event), failed and hung requests, and the p50 / p99
time to first token. Usage:

    python -m bench.load --url http://127.0.0.1:8000 --clients 8 --requests 32
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import random
import socket
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from urllib.parse import urlsplit

import httpx

REJECTED = {429, 503}


@dataclass
class Report:
    """What happened to every request of one run."""

    requests: int = 0
    completed: int = 0
    disconnected: int = 0  # hung up on purpose after a few events
    rejected: int = 0
    failed: int = 0
    hung: int = 0  # still running when the time limit came
    statuses: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    ttft: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def percentile(self, q: float) -> float | None:
        """Time to first token at quantile `q`, in seconds."""
        if not self.ttft:
            return None
        ordered = sorted(self.ttft)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    def summary(self) -> dict[str, object]:
        """The figures, without the raw samples."""
        figures = {k: v for k, v in asdict(self).items() if k != "ttft"}
        figures["ttft_p50"] = self.percentile(0.5)
        figures["ttft_p99"] = self.percentile(0.99)
        figures["ttft_mean"] = statistics.fmean(self.ttft) if self.ttft else None
        return figures


def require_loopback(url: str) -> None:
    """Refuse any target but this machine: this tool is for loopback only."""
    host = urlsplit(url).hostname or ""
    addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    if not addresses or not all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses):
        raise SystemExit(f"refusing {url}: the load tool targets loopback addresses only")


async def one_request(
    client: httpx.AsyncClient, body: dict, hang_up_after: int | None, report: Report
) -> None:
    started = time.monotonic()
    async with client.stream("POST", "/v1/completions", json=body) as response:
        report.statuses[str(response.status_code)] = report.statuses.get(str(response.status_code), 0) + 1
        if response.status_code in REJECTED:
            report.rejected += 1
            return
        if response.status_code != 200:
            report.failed += 1
            report.failures.append(f"status {response.status_code}: {(await response.aread())[:200]!r}")
            return
        events = 0
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                report.completed += 1
                return
            payload = json.loads(line[6:])
            if "error" in payload:
                if payload["error"].get("code") == "queue_timeout":
                    report.rejected += 1
                else:
                    report.failed += 1
                    report.failures.append(f"error event: {payload['error']}")
                return
            if events == 0:
                report.ttft.append(time.monotonic() - started)
            events += 1
            if hang_up_after is not None and events >= hang_up_after:
                report.disconnected += 1
                return  # leaving the block closes the connection mid-stream
    report.failed += 1
    report.failures.append("stream ended without [DONE]")


async def run(
    url: str,
    clients: int,
    requests: int,
    max_tokens: int,
    disconnect_fraction: float,
    time_limit: float,
    seed: int = 0,
) -> Report:
    """Fire `requests` streaming completions, `clients` at a time, within `time_limit` seconds."""
    require_loopback(url)
    report = Report(requests=requests)
    chooser = random.Random(seed)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    gate = asyncio.Semaphore(clients)
    started = time.monotonic()

    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=time_limit) as client:

        async def guarded(index: int) -> None:
            hang_up_after = chooser.randint(1, 5) if chooser.random() < disconnect_fraction else None
            body = {
                "prompt": f"Request {index}: count with me. 1, 2,",
                "max_tokens": max_tokens,
                "stream": True,
                "temperature": 0.7,
                "seed": index,
            }
            async with gate:
                try:
                    await one_request(client, body, hang_up_after, report)
                except httpx.HTTPError as exc:
                    report.failed += 1
                    report.failures.append(f"{type(exc).__name__}: {exc}")

        tasks = [asyncio.create_task(guarded(i)) for i in range(requests)]
        done, pending = await asyncio.wait(tasks, timeout=time_limit)
        for task in pending:
            task.cancel()
        report.hung = len(pending)
        await asyncio.gather(*pending, return_exceptions=True)
    report.seconds = time.monotonic() - started
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--disconnect-fraction", type=float, default=0.25)
    parser.add_argument("--time-limit", type=float, default=300.0)
    parser.add_argument("--seed", type=int, default=0, help="which requests hang up, and their seeds")
    args = parser.parse_args(argv)
    report = asyncio.run(
        run(
            args.url,
            args.clients,
            args.requests,
            args.max_tokens,
            args.disconnect_fraction,
            args.time_limit,
            args.seed,
        )
    )
    json.dump(report.summary(), sys.stdout, indent=2)
    print()
    return 0 if report.failed == 0 and report.hung == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
