"""Benchmark: interactive time to first token behind a queue of low-priority requests, with vLLM's `priority`.

    python -m bench.request_priority --repeats 3 --record

One worker of `--parallel` sequences, kept saturated by a bulk client of twice as many
threads sending long requests (so requests always wait for a sequence). Interactive
probes (streamed chat completions, one after another) are timed, interleaved: on an idle
server; behind the queue in arrival order (no `priority` anywhere: first come, first
served); and with `priority: -10` on the probes and `priority: 10` on the bulk requests,
so a probe takes the next free sequence ahead of the queue (a running stream is never cut
for it). llama-server (the same slots, which has no request priority) is timed behind the
same queue, for reference. The bulk's own pace is reported beside.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from app.settings.values import default_model_path
from bench.batch_priority import Bulk, interleaved, probe, ttft_table
from bench.run import add_output_options, publish

IDLE, FIFO, PRIORITY = "idle", "behind the queue, first come first served", "behind the queue, priority -10"
HIGH, LOW = {"priority": -10}, {"priority": 10}
TARGET_RATIO = 0.5  # with priority, a probe's TTFT p50 at most this share of the first-come one


def measure(
    args: argparse.Namespace, url: str, condition: str, seed: int
) -> tuple[list[float], float | None]:
    """TTFTs of `args.probes` probes under `condition`, and the bulk's requests per minute."""
    if condition == IDLE:
        return [probe(url, seed + n) for n in range(args.probes)], None
    urgent = condition == PRIORITY
    with Bulk(url, 2 * args.parallel, args.line_tokens, LOW if urgent else None) as bulk:
        ttfts = []
        for n in range(args.probes):
            ttfts.append(probe(url, seed + n, HIGH if urgent else None))
            time.sleep(args.gap)
    return ttfts, bulk.pace


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--probes", type=int, default=8, help="interactive requests per condition and repeat")
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--line-tokens", type=int, default=64, help="tokens each bulk request generates")
    parser.add_argument("--gap", type=float, default=0.3, help="seconds between probes")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=2048)
    add_output_options(parser)
    parser.add_argument("--model", default=default_model_path())
    args = parser.parse_args(argv)
    runs = [("ours", IDLE), ("ours", FIFO), ("ours", PRIORITY), ("llama-server", FIFO)]
    results, paces = interleaved(args, runs, measure)
    publish(report(args, results, paces), args)
    return 0


def report(
    args: argparse.Namespace,
    results: dict[tuple[str, str], list[float]],
    paces: dict[tuple[str, str], list[float]],
) -> str:
    lines = [
        f"One worker of {args.parallel} sequences, {args.threads} threads, kept saturated by "
        f"{2 * args.parallel} bulk clients (requests of {args.line_tokens} tokens); {args.probes} "
        f"interactive probes (~250-token prompt, streamed) per condition and repeat, {args.gap} s apart; "
        f"{args.repeats} repeats, interleaved.",
        "",
        *ttft_table(results, paces, "bulk requests/min"),
    ]
    fifo = statistics.median(results[("ours", FIFO)])
    urgent = statistics.median(results[("ours", PRIORITY)])
    reference = statistics.median(results[("llama-server", FIFO)])
    ratio = urgent / fifo
    verdict: dict[bool, Any] = {True: "met", False: "missed"}
    lines += [
        "",
        "### Targets",
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
        f"| with priority, TTFT p50 at most {TARGET_RATIO}× first come first served | {ratio:.2f}× "
        f"({urgent * 1000:.0f} vs {fifo * 1000:.0f} ms) | {verdict[ratio <= TARGET_RATIO]} |",
        f"| with priority, below llama-server's behind the same queue | {urgent * 1000:.0f} vs "
        f"{reference * 1000:.0f} ms | {verdict[urgent < reference]} |",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
