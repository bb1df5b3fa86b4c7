"""What a benchmark measures: in-process llama-cpp-python, single HTTP streams, concurrent sweeps, memory."""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

PROMPT = "Count with me: 1, 2, 3, 4,"
ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Stream:
    """One generation as a client saw it."""

    ttft: float  # seconds from sending to the first generated text
    tokens: int
    decode_seconds: float  # from the first to the last generated text

    @property
    def tokens_per_second(self) -> float:
        return (self.tokens - 1) / self.decode_seconds if self.decode_seconds > 0 else 0.0


def raw(model_path: str, threads: int, n_ctx: int, max_tokens: int, seed: int) -> Stream:
    """llama-cpp-python with no HTTP, in a fresh process: the ceiling for this stack."""
    command = [
        sys.executable,
        "-m",
        "bench.rawrun",
        "--model",
        model_path,
        "--threads",
        str(threads),
        "--n-ctx",
        str(n_ctx),
        "--max-tokens",
        str(max_tokens),
        "--seed",
        str(seed),
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True, timeout=600)
    return Stream(**json.loads(result.stdout.strip().splitlines()[-1]))


async def stream(client: httpx.AsyncClient, max_tokens: int, seed: int) -> Stream | int:
    """One streamed completion over HTTP; the status code if refused, 0 if the stream broke."""
    try:
        return await _stream(client, max_tokens, seed)
    except httpx.HTTPError:
        return 0  # e.g. a server that cuts one stream short when another arrives


async def _stream(client: httpx.AsyncClient, max_tokens: int, seed: int) -> Stream | int:
    body = {
        "prompt": PROMPT,
        "max_tokens": max_tokens,
        "temperature": 0,
        "seed": seed,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    started = time.perf_counter()
    first = last = None
    tokens = 0
    async with client.stream("POST", "/v1/completions", json=body) as response:
        if response.status_code != 200:
            await response.aread()
            return response.status_code
        async for line in response.aiter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            if any(choice.get("text") for choice in chunk.get("choices", [])):
                last = time.perf_counter()
                first = first or last
    if first is None or last is None:
        return 0
    return Stream(first - started, tokens, last - first)


def single(url: str, max_tokens: int, seed: int) -> Stream:
    """One stream from a warm server."""

    async def run() -> Stream:
        async with httpx.AsyncClient(base_url=url, timeout=600) as client:
            result = await stream(client, max_tokens, seed)
            assert isinstance(result, Stream), f"refused: {result}"
            return result

    return asyncio.run(run())


@dataclass
class Sweep:
    """`clients` concurrent clients, each sending `per_client` streams one after another."""

    clients: int
    tokens_per_second: float  # all generated tokens over the wall time
    ttft_p50: float
    ttft_p99: float
    rejected: int  # refused with 429 or 503
    failed: int  # broken or empty streams, other statuses


def sweep(url: str, clients: int, per_client: int, max_tokens: int) -> Sweep:
    """Aggregate throughput and time to first token under concurrency."""

    async def run() -> Sweep:
        limits = httpx.Limits(max_connections=clients)
        async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:

            async def one_client(index: int) -> list[Stream | int]:
                return [await stream(client, max_tokens, seed=index * 100 + k) for k in range(per_client)]

            started = time.perf_counter()
            results = [
                r for batch in await asyncio.gather(*(one_client(i) for i in range(clients))) for r in batch
            ]
            wall = time.perf_counter() - started
        done = [r for r in results if isinstance(r, Stream)]
        ttfts = sorted(r.ttft for r in done) or [float("nan")]
        return Sweep(
            clients,
            sum(r.tokens for r in done) / wall,
            statistics.median(ttfts),
            ttfts[min(len(ttfts) - 1, round(0.99 * (len(ttfts) - 1)))],
            sum(1 for r in results if r in (429, 503)),
            sum(1 for r in results if not isinstance(r, Stream) and r not in (429, 503)),
        )

    return asyncio.run(run())


def memory_kib(pids: list[int]) -> tuple[list[int], int]:
    """Resident memory per process (RSS) and the group's proportional total (PSS, shared pages split)."""
    rss, pss = [], 0
    for pid in pids:
        fields = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]
        )
        rss.append(int(fields["Rss"].split()[0]))
        pss += int(fields["Pss"].split()[0])
    return rss, pss
