"""Benchmark: the next turn of a Responses conversation, by previous_response_id or with the whole history.

    python -m bench.turns --repeats 3 --record

A conversation of several turns on one worker, each turn streamed on a new connection,
three ways, interleaved: ours continuing by `previous_response_id` (the server rebuilds
the history from its store, SQLite by default), ours with the whole history in `input`
(stateless, as before the store), and llama-server's chat completions with the whole
history. The figure is the time to first token of turns 2 and later: the store's
lookup and the rebuilt prompt should cost next to nothing, because the rebuilt prompt
is the same tokens as the history sent in full, so the KV cache still holds all but the
new turn.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import httpx

from app.settings.values import default_model_path
from bench import references
from bench.run import add_output_options, progress, publish, rotate
from bench.workloads import CODE
from harness import llama_server
from harness.servers import Service

BY_ID, FULL, CPP = "ours, previous_response_id", "ours, whole history", "llama-server, whole history"
QUESTIONS = ("What is this code for?", "What does its first function do?", "How would you test it?",
             "What could go wrong?", "Summarise it in one line.")  # fmt: skip
TARGET_SLOWER = 0.10  # previous_response_id may cost at most this share of TTFT over the whole history


def start(args: argparse.Namespace) -> dict[str, Service]:
    started: dict[str, Service] = {}
    try:
        ours = references.ours(1, args.threads, args.n_ctx, LLM_PARALLEL="2")
        started[BY_ID] = started[FULL] = ours
        started[CPP] = llama_server.start(args.model, args.threads, 2, args.n_ctx)
    except BaseException:
        for service in set(started.values()):
            service.stop()
        raise
    return started


def _streamed(url: str, path: str, body: dict[str, Any]) -> tuple[float, str, dict[str, Any]]:
    """POST a streamed body; (time to first text, text, the last event's data)."""
    started, first, text, last = time.perf_counter(), None, "", {}
    with httpx.stream("POST", url + path, json={**body, "stream": True}, timeout=600) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            event = json.loads(line[6:])
            piece = event.get("delta") if event.get("type") == "response.output_text.delta" else None
            for choice in event.get("choices", []):
                piece = (choice.get("delta") or {}).get("content")
            if piece:
                first = first or time.perf_counter()
                text += piece
            last = event
    return (first or time.perf_counter()) - started, text, last


def conversation(name: str, url: str, turns: int, tokens: int, seed: int) -> list[float]:
    """One conversation; the time to first token of each turn after the first."""
    system = f"Conversation {seed}. You review code. The code:\n{CODE[:1600]}"
    history: list[dict[str, str]] = [{"role": "system", "content": system}]
    previous: str | None = None
    ttfts = []
    for number, question in enumerate(QUESTIONS[:turns]):
        history.append({"role": "user", "content": question})
        common = {"temperature": 0, "max_output_tokens": tokens}
        if name == CPP:
            body = {"messages": history, "max_tokens": tokens, "temperature": 0}
            ttft, text, _ = _streamed(url, "/v1/chat/completions", body)
        elif name == BY_ID and previous is not None:
            body = {**common, "input": question, "previous_response_id": previous}
            ttft, text, last = _streamed(url, "/v1/responses", body)
            previous = last["response"]["id"]
        else:
            ttft, text, last = _streamed(url, "/v1/responses", {**common, "input": history})
            previous = last["response"]["id"]
        history.append({"role": "assistant", "content": text})
        if number:
            ttfts.append(ttft)
    return ttfts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--conversations", type=int, default=4, help="conversations per target per repeat")
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=40)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=4096)
    add_output_options(parser)
    parser.add_argument("--model", default=default_model_path())
    args = parser.parse_args(argv)
    servers = start(args)
    ttfts: dict[str, list[float]] = {name: [] for name in servers}
    try:
        seed = 0
        for repeat in range(args.repeats):
            for name in rotate(list(servers), repeat):
                progress(f"round {repeat + 1}: {name}")
                for _ in range(args.conversations):
                    seed += 1  # a new system prompt: no conversation reads another's cache
                    ttfts[name] += conversation(name, servers[name].url, args.turns, args.max_tokens, seed)
    finally:
        for service in set(servers.values()):
            service.stop()
    text = report(args, ttfts)
    publish(text, args)
    return 0


def report(args: argparse.Namespace, ttfts: dict[str, list[float]]) -> str:
    lines = [
        f"{args.conversations} conversations per target and repeat, {args.turns} turns of up to "
        f"{args.max_tokens} tokens, a ~500-token system prompt each; {args.repeats} repeats, interleaved. "
        "Time to first token of turns 2 and later.",
        "",
        "| target | TTFT p50 (ms) | TTFT p90 (ms) | turns |",
        "|---|---|---|---|",
    ]
    for name, values in ttfts.items():
        ordered = sorted(values)
        p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
        lines.append(
            f"| {name} | {statistics.median(values) * 1000:.1f} | {p90 * 1000:.1f} | {len(values)} |"
        )
    by_id, full = statistics.median(ttfts[BY_ID]), statistics.median(ttfts[FULL])
    slower = by_id / full - 1
    verdict = "met" if slower <= TARGET_SLOWER else "missed"
    lines += [
        "",
        "### Targets",
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
        f"| previous_response_id within {TARGET_SLOWER:.0%} of the whole history's TTFT | "
        f"{slower * 100:+.1f} % ({by_id * 1000:.1f} vs {full * 1000:.1f} ms) | {verdict} |",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
