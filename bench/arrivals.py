"""A benchmark workload: long prompts arriving while streams run, and what the running streams suffer.

Four streams (by default) run; once each has its first token, long prompts (about 1,500
tokens, each its own, so no server answers them from its cache) arrive one after another.
Measured per server: each long prompt's time to first token, and the running streams'
inter-token latency while the prompts are evaluated (p50, p99, the longest wait): a server
that evaluates a prompt whole stops every stream for as long; one that evaluates it in
chunks between decode steps keeps them going, slower, and answers the prompt later.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass

import httpx

from bench.measure import Stream, Tally, percentile, request_body

FILLER = (
    "The committee met on a grey morning to review the harbour's accounts, the repairs to the "
    "north pier, the dredging of the channel and the new rules for night mooring. "
)


@dataclass
class Arrivals:
    """One run: the long prompts' times to first token, the running streams' waits while they came."""

    ttfts: list[float]
    gaps: list[float]
    failed: list[str]  # what broke: a long prompt's request, or a running stream before the end

    @property
    def itl_p50(self) -> float:
        return percentile(self.gaps, 0.5)

    @property
    def itl_p99(self) -> float:
        return percentile(self.gaps, 0.99)

    @property
    def longest(self) -> float:
        return max(self.gaps, default=float("nan"))


def long_prompt(index: int, tokens: int) -> str:
    """Long prompt number `index`, about `tokens` tokens (a sentence of the filler is about 40)."""
    return f"Minutes, meeting {index}. " + FILLER * max(1, tokens // 40) + "Summary:"


def measure(url: str, running: int, arriving: int, prompt_tokens: int, first_index: int) -> Arrivals:
    """Run `running` streams, then send `arriving` long prompts one after another, on `url`."""

    async def run() -> Arrivals:
        limits = httpx.Limits(max_connections=running + 1)
        async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:
            started = [asyncio.Event() for _ in range(running)]
            stop = asyncio.Event()
            tallies = [Tally() for _ in range(running)]
            streams = [
                asyncio.create_task(_run_until(client, first_index + k, tallies[k], started[k], stop))
                for k in range(running)
            ]
            for event in started:
                await event.wait()
            window_start = time.perf_counter()
            ttfts, failed = [], []
            for k in range(arriving):
                try:
                    prompt = long_prompt(first_index + running + k, prompt_tokens)
                    ttfts.append(await _first_token(client, prompt))
                except httpx.HTTPError as exc:  # counted and said, not the end of the run
                    failed.append(f"a long prompt: {type(exc).__name__}: {exc}"[:120])
            window_end = time.perf_counter()
            stop.set()
            failed += [why for why in await asyncio.gather(*streams) if why]
        gaps = [gap for tally in tallies for gap, at in tally.gaps if window_start < at <= window_end]
        return Arrivals(ttfts, gaps, failed)

    return asyncio.run(run())


async def _run_until(
    client: httpx.AsyncClient, index: int, tally: Tally, started: asyncio.Event, stop: asyncio.Event
) -> str:
    """A long stream, read until `stop` is set (then the client hangs up); what broke it, if anything."""
    body = request_body(1536, index)
    try:
        async with client.stream("POST", "/v1/completions", json=body) as response:
            if response.status_code != 200:
                return f"a running stream: status {response.status_code}"
            async for line in response.aiter_lines():
                tally.feed(line)
                if tally.first is not None:
                    started.set()
                if stop.is_set():
                    break
    except httpx.HTTPError as exc:
        return "" if stop.is_set() else f"a running stream: {type(exc).__name__}: {exc}"[:120]
    finally:
        started.set()  # a stream that ended early must not hold the run up
    return ""


async def _first_token(client: httpx.AsyncClient, prompt: str) -> float:
    """Seconds from sending `prompt` to its first generated text (then the rest is read)."""
    body = {"prompt": prompt, "max_tokens": 4, "temperature": 0, "ignore_eos": True, "stream": True}
    tally = Tally()
    async with client.stream("POST", "/v1/completions", json=body) as response:
        if response.status_code != 200:
            raise httpx.HTTPStatusError(
                f"status {response.status_code}", request=response.request, response=response
            )
        async for line in response.aiter_lines():
            tally.feed(line)
    result: Stream | None = tally.result()
    if result is None:
        raise httpx.DecodingError("no text came")
    return result.ttft


def median_arrivals(runs: list[Arrivals]) -> tuple[float, float, float, float]:
    """Medians over runs: long-prompt TTFT p50, running streams' ITL p50 and p99, the longest wait."""
    return (
        statistics.median(percentile(r.ttfts, 0.5) for r in runs),
        statistics.median(r.itl_p50 for r in runs),
        statistics.median(r.itl_p99 for r in runs),
        statistics.median(r.longest for r in runs),
    )
