"""Benchmark: interactive time to first token beside a running batch, against the same load sent as requests.

    python -m bench.batch_priority --repeats 3 --record

One worker of `--parallel` sequences. Interactive probes (streamed chat completions, a
~250-token prompt each, one after another) are timed under three conditions,
interleaved: an idle server; a batch of long lines running through /v1/batches (low
priority: one sequence kept free, and an interactive request takes a line's sequence
back); and the same lines sent as ordinary requests by a bulk client filling every
sequence, as a user without a batch API would. llama-server (the same slots) is timed
idle and under that bulk client, for reference. The background's own pace (lines per
minute) is reported beside, the price of keeping a sequence for interactive work.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from app.settings.values import default_model_path
from bench import references
from bench.run import add_output_options, progress, publish, rotate
from bench.workloads import CODE
from harness import llama_server
from harness.servers import Service

IDLE, BATCH, BULK = "idle", "beside a batch", "beside the same load as requests"
TARGET_RATIO = 1.5  # interactive TTFT beside a batch at most this many times the idle one


def line_body(n: int, tokens: int) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": f"Story {n}: tell a long story about a lighthouse."}],
            "max_tokens": tokens, "ignore_eos": True, "temperature": 0}  # fmt: skip


def probe(url: str, seed: int, extra: dict[str, Any] | None = None) -> float:
    """One interactive request (with `extra` fields), streamed; its time to first token in seconds."""
    prompt = f"Question {seed}. What does this code do?\n{CODE[:900]}"
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": 8, "stream": True,
            "temperature": 0, **(extra or {})}  # fmt: skip
    started = time.perf_counter()
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=600) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: {") and (json.loads(line[6:])["choices"] or [{}])[0].get(
                "delta", {}
            ).get("content"):
                return time.perf_counter() - started
    return time.perf_counter() - started


class Bulk:
    """A bulk client: `clients` threads sending the batch's lines as ordinary requests (with `extra`
    fields) until stopped."""

    def __init__(self, url: str, clients: int, tokens: int, extra: dict[str, Any] | None = None) -> None:
        self.url, self.tokens, self.done, self.stop = url, tokens, 0, threading.Event()
        self.extra = extra or {}
        self.threads = [threading.Thread(target=self._send, args=(n,), daemon=True) for n in range(clients)]

    def _send(self, n: int) -> None:
        with httpx.Client(timeout=600) as client:
            while not self.stop.is_set():
                body = line_body(n, self.tokens) | self.extra
                client.post(self.url + "/v1/chat/completions", json=body).raise_for_status()
                self.done += 1

    def __enter__(self) -> Bulk:
        for thread in self.threads:
            thread.start()
        _wait(lambda: self.done >= 1, "a first bulk answer")
        self.started, self.at_start = time.perf_counter(), self.done
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.elapsed = time.perf_counter() - self.started
        self.pace = (self.done - self.at_start) / self.elapsed * 60
        for thread in self.threads:
            thread.join()


class Batch:
    """A batch of `lines` long lines running through /v1/batches; cancelled on exit."""

    def __init__(self, url: str, lines: int, tokens: int) -> None:
        self.client, self.lines, self.tokens = httpx.Client(base_url=url, timeout=60), lines, tokens

    def _completed(self) -> int:
        counts = self.client.get(f"/v1/batches/{self.id}").json()["request_counts"]
        return int(counts["completed"])

    def __enter__(self) -> Batch:
        rows = [{"custom_id": f"l{n}", "method": "POST", "url": "/v1/chat/completions",
                 "body": line_body(n, self.tokens)} for n in range(self.lines)]  # fmt: skip
        data = "".join(json.dumps(row) + "\n" for row in rows).encode()
        uploaded = self.client.post("/v1/files", files={"file": ("b.jsonl", data)}, data={"purpose": "batch"})
        body = {
            "input_file_id": uploaded.json()["id"],
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
        }
        self.id = self.client.post("/v1/batches", json=body).json()["id"]
        _wait(lambda: self._completed() >= 1, "a first batch line")
        self.started, self.at_start = time.perf_counter(), self._completed()
        return self

    def __exit__(self, *_: object) -> None:
        self.elapsed = time.perf_counter() - self.started
        self.pace = (self._completed() - self.at_start) / self.elapsed * 60
        self.client.post(f"/v1/batches/{self.id}/cancel")
        _wait(lambda: self.client.get(f"/v1/batches/{self.id}").json()["status"] == "cancelled", "the cancel")
        self.client.close()


def _wait(check: Any, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not come within {timeout}s")
        time.sleep(0.1)


def measure(
    args: argparse.Namespace, url: str, condition: str, seed: int
) -> tuple[list[float], float | None]:
    """TTFTs of `args.probes` probes under `condition`, and the background's lines per minute."""
    if condition == IDLE:
        return [probe(url, seed + n) for n in range(args.probes)], None
    background: Batch | Bulk = (
        Batch(url, 400, args.line_tokens)
        if condition == BATCH
        else Bulk(url, args.parallel, args.line_tokens)
    )
    with background:
        ttfts = []
        for n in range(args.probes):
            ttfts.append(probe(url, seed + n))
            time.sleep(args.gap)  # a person reads; the background takes its sequences again
    return ttfts, background.pace


Measure = Callable[[argparse.Namespace, str, str, int], tuple[list[float], float | None]]


def interleaved(
    args: argparse.Namespace, runs: list[tuple[str, str]], measure: Measure
) -> tuple[dict[tuple[str, str], list[float]], dict[tuple[str, str], list[float]]]:
    """Ours (one worker of `args.parallel` sequences) and llama-server (as many slots), each
    (target, condition) of `runs` measured in turn, `args.repeats` rounds in a rotating order:
    the probes' TTFTs and the background's pace, by run."""
    ours = references.ours(
        1, args.threads, args.n_ctx, LLM_PARALLEL=str(args.parallel), LLM_MODEL_PATH=args.model
    )
    cpp: Service | None = None
    results: dict[tuple[str, str], list[float]] = {}
    paces: dict[tuple[str, str], list[float]] = {}
    try:
        cpp = llama_server.start(args.model, args.threads, args.parallel, args.n_ctx)
        seed = 0
        for repeat in range(args.repeats):
            for target, condition in rotate(runs, repeat):
                progress(f"round {repeat + 1}: {target}, {condition}")
                seed += 100  # new prompts: no probe reads another's cache
                url = ours.url if target == "ours" else cpp.url
                ttfts, pace = measure(args, url, condition, seed)
                results.setdefault((target, condition), []).extend(ttfts)
                if pace is not None:
                    paces.setdefault((target, condition), []).append(pace)
    finally:
        ours.stop()
        if cpp is not None:
            cpp.stop()
    return results, paces


def ttft_table(
    results: dict[tuple[str, str], list[float]], paces: dict[tuple[str, str], list[float]], pace_name: str
) -> list[str]:
    """A Markdown table of the probes' TTFT p50 and p90 per target and condition, with the
    background's pace beside."""
    lines = [
        f"| target | condition | TTFT p50 (ms) | TTFT p90 (ms) | probes | {pace_name} |",
        "|---|---|---|---|---|---|",
    ]
    for (target, condition), values in results.items():
        ordered = sorted(values)
        p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
        pace = paces.get((target, condition))
        shown = f"{statistics.mean(pace):.1f}" if pace else "—"
        lines.append(
            f"| {target} | {condition} | {statistics.median(values) * 1000:.0f} | {p90 * 1000:.0f} | "
            f"{len(values)} | {shown} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--probes", type=int, default=10, help="interactive requests per condition and repeat"
    )
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--line-tokens", type=int, default=96, help="tokens each background line generates")
    parser.add_argument("--gap", type=float, default=0.5, help="seconds between probes")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=2048)
    add_output_options(parser)
    parser.add_argument("--model", default=default_model_path())
    args = parser.parse_args(argv)
    runs = [("ours", IDLE), ("ours", BATCH), ("ours", BULK), ("llama-server", IDLE), ("llama-server", BULK)]
    results, paces = interleaved(args, runs, measure)
    text = report(args, results, paces)
    publish(text, args)
    return 0


def report(
    args: argparse.Namespace,
    results: dict[tuple[str, str], list[float]],
    paces: dict[tuple[str, str], list[float]],
) -> str:
    lines = [
        f"One worker of {args.parallel} sequences, {args.threads} threads; {args.probes} interactive probes "
        f"(~250-token prompt, streamed) per condition and repeat, {args.gap} s apart; background lines of "
        f"{args.line_tokens} tokens; {args.repeats} repeats, interleaved.",
        "",
        *ttft_table(results, paces, "background lines/min"),
    ]
    idle = statistics.median(results[("ours", IDLE)])
    batch = statistics.median(results[("ours", BATCH)])
    bulk = statistics.median(results[("ours", BULK)])
    ratio = batch / idle
    lines += [
        "",
        "### Targets",
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
        f"| interactive TTFT p50 beside a batch at most {TARGET_RATIO}× idle | {ratio:.2f}× "
        f"({batch * 1000:.0f} vs {idle * 1000:.0f} ms) | {'met' if ratio <= TARGET_RATIO else 'missed'} |",
        f"| beside a batch lower than beside the same load as requests | {batch * 1000:.0f} vs "
        f"{bulk * 1000:.0f} ms | {'met' if batch < bulk else 'missed'} |",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
