"""What a benchmark measures: in-process llama-cpp-python, single HTTP streams, concurrent sweeps, memory."""

from __future__ import annotations

import asyncio
import http.client
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def prompt(index: int) -> str:
    """Prompt number `index`: each request its own, sharing no prefix, so no server serves it from cache."""
    return f"{index} is my number. Count with me: 1, 2, 3, 4,"


@dataclass
class Stream:
    """One generation as a client saw it."""

    ttft: float  # seconds from sending to the first generated text
    tokens: int
    decode_seconds: float  # from the first to the last generated text
    # Between consecutive events with text, and when each ended (seconds, perf_counter): what a
    # reader of the stream waits between tokens (an event may carry several, with drafts).
    gaps: tuple[tuple[float, float], ...] = ()

    @property
    def tokens_per_second(self) -> float:
        return (self.tokens - 1) / self.decode_seconds if self.decode_seconds > 0 else 0.0


def request_body(max_tokens: int, index: int) -> dict[str, object]:
    """The streamed, greedy completion of prompt `index` every target is asked for, `max_tokens` long."""
    return {
        "prompt": prompt(index),
        "max_tokens": max_tokens,
        "temperature": 0,
        "seed": index,
        "ignore_eos": True,  # llama-server and ours: exactly max_tokens (the peer ignores it)
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def raw(model_path: str, threads: int, n_ctx: int, max_tokens: int, index: int) -> Stream:
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
        "--index",
        str(index),
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True, timeout=600)
    return Stream(**json.loads(result.stdout.strip().splitlines()[-1]))


async def stream(client: httpx.AsyncClient, max_tokens: int, index: int) -> Stream | int | str:
    """One streamed completion over HTTP; the status code if refused, what went wrong if it broke."""
    try:
        return await _stream(client, max_tokens, index)
    except httpx.HTTPError as exc:  # e.g. a server that cuts one stream short when another arrives
        return f"{type(exc).__name__}: {exc}"[:120]


class Tally:
    """Times and counts the events of one stream as they arrive."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.first: float | None = None
        self.last: float | None = None
        self.texts = self.usage_tokens = 0
        self.gaps: list[tuple[float, float]] = []

    def feed(self, line: str | bytes) -> None:
        if not (line.startswith(b"data: {") if isinstance(line, bytes) else line.startswith("data: {")):
            return
        now = time.perf_counter()
        chunk = json.loads(line[6:])
        if chunk.get("usage"):
            self.usage_tokens = chunk["usage"]["completion_tokens"]
        if any(self.text_of(choice) for choice in chunk.get("choices", [])):
            self.texts += 1
            if self.last is not None:
                self.gaps.append((now - self.last, now))
            self.first, self.last = self.first or now, now

    @staticmethod
    def text_of(choice: dict) -> str | None:
        """A completion's text (a chat's comes as `delta.content`: ChatTally)."""
        return choice.get("text")

    def result(self) -> Stream | None:
        if self.first is None or self.last is None:
            return None
        # A server that ignores include_usage (the peer) sends one event per token.
        tokens = self.usage_tokens or self.texts
        return Stream(self.first - self.started, tokens, self.last - self.first, tuple(self.gaps))


async def _stream(client: httpx.AsyncClient, max_tokens: int, index: int) -> Stream | int | str:
    tally = Tally()
    async with client.stream("POST", "/v1/completions", json=request_body(max_tokens, index)) as response:
        if response.status_code != 200:
            await response.aread()
            return response.status_code
        async for line in response.aiter_lines():
            tally.feed(line)
    return tally.result() or "a stream without text"


def single(url: str, max_tokens: int, index: int, time_limit: float = 600) -> Stream:
    """One stream from a warm server, read by a blocking client that costs little CPU.

    The client shares the machine's cores with the server it measures: an asyncio
    client parsing every event would slow the very decoding it times. Past
    `time_limit` seconds the client hangs up and what arrived so far is the result
    (a server crawling beside a busy process would otherwise take many minutes).
    """
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=600)
    tally = Tally()
    connection.request(
        "POST",
        "/v1/completions",
        json.dumps(request_body(max_tokens, index)),
        {"Content-Type": "application/json"},
    )
    response = connection.getresponse()
    assert response.status == 200, response.status
    deadline = time.perf_counter() + time_limit
    for line in response:
        tally.feed(line)
        if time.perf_counter() > deadline:
            break
    connection.close()
    result = tally.result()
    assert result is not None, "no text came"
    return result


@dataclass
class Sweep:
    """`clients` concurrent clients, each sending `per_client` streams one after another."""

    clients: int
    tokens_per_second: float  # all generated tokens over the wall time
    ttft_p50: float
    ttft_p99: float
    rejected: int  # refused with 429 or 503
    failed: int  # broken or empty streams, other statuses
    why: tuple[str, ...] = ()  # what went wrong with the failed ones
    # Inter-token latency over every stream of the sweep: the streams running while others start
    # wait out their prompts' evaluation, which shows at the high percentiles.
    itl_p50: float = float("nan")
    itl_p99: float = float("nan")


def sweep(url: str, clients: int, per_client: int, max_tokens: int, first_index: int) -> Sweep:
    """Aggregate throughput and time to first token under concurrency, every stream its own prompt."""

    async def run() -> Sweep:
        limits = httpx.Limits(max_connections=clients)
        async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:

            async def one_client(index: int) -> list[Stream | int | str]:
                return [
                    await stream(client, max_tokens, first_index + index * per_client + k)
                    for k in range(per_client)
                ]

            started = time.perf_counter()
            results = [
                r for batch in await asyncio.gather(*(one_client(i) for i in range(clients))) for r in batch
            ]
            wall = time.perf_counter() - started
        done = [r for r in results if isinstance(r, Stream)]
        ttfts = [r.ttft for r in done]
        gaps = [gap for r in done for gap, _ in r.gaps]
        return Sweep(
            clients,
            sum(r.tokens for r in done) / wall,
            percentile(ttfts, 0.5),
            percentile(ttfts, 0.99),
            sum(1 for r in results if r in (429, 503)),
            sum(1 for r in results if not isinstance(r, Stream) and r not in (429, 503)),
            tuple(sorted({str(r) for r in results if not isinstance(r, Stream) and r not in (429, 503)})),
            percentile(gaps, 0.5),
            percentile(gaps, 0.99),
        )

    return asyncio.run(run())


def percentile(values: list[float], share: float) -> float:
    """The value below which `share` of `values` lie (nearest rank; NaN for none)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return statistics.median(ordered) if share == 0.5 else ordered[round(share * (len(ordered) - 1))]


def memory_kib(pids: list[int]) -> tuple[list[int], int, int]:
    """Per process RSS; the group's PSS (shared pages split between sharers); PSS of the GGUF mappings.

    If the weights are shared through mmap, the last figure stays one copy however many workers.
    """
    rss, pss, weights = [], 0, 0
    for pid in pids:
        fields = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]
        )
        rss.append(int(fields["Rss"].split()[0]))
        pss += int(fields["Pss"].split()[0])
        in_weights = False
        for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
            parts = line.split()
            if parts and "-" in parts[0] and len(parts) >= 5:  # a mapping's header line
                in_weights = parts[-1].endswith(".gguf")
            elif in_weights and parts[:1] == ["Pss:"]:
                weights += int(parts[1])
    return rss, pss, weights


def median_sweep(runs: list[Sweep]) -> Sweep:
    """The median of each figure over repeated sweeps; the worst count of refused or broken streams."""
    return Sweep(
        runs[0].clients,
        statistics.median(r.tokens_per_second for r in runs),
        statistics.median(r.ttft_p50 for r in runs),
        statistics.median(r.ttft_p99 for r in runs),
        max(r.rejected for r in runs),
        max(r.failed for r in runs),
        tuple(sorted({why for r in runs for why in r.why})),
        statistics.median(r.itl_p50 for r in runs),
        statistics.median(r.itl_p99 for r in runs),
    )


def threads_in_use(url: str) -> int | None:
    """Ours: the llama.cpp threads its workers use now (llm_threads); None for a server without it."""
    try:
        text = httpx.get(url + "/metrics", timeout=10).text
    except httpx.HTTPError:
        return None
    for line in text.splitlines():
        if line.startswith("llm_threads "):
            return int(float(line.split()[1]))
    return None


def warm_back_up(url: str, threads: int, limit: float = 90) -> None:
    """After a busy neighbour has gone: small requests until ours uses every thread again."""
    deadline = time.monotonic() + limit
    while (used := threads_in_use(url)) is not None and used < threads and time.monotonic() < deadline:
        single(url, 32, 0)
        time.sleep(1)
