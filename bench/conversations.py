"""Benchmark: multi-turn conversations over two workers, routed by cache or by load, beside llama-server.

    python -m bench.conversations --repeats 3 --record

8 conversations at once, 4 turns each, every turn on a new connection (as behind a
proxy that pools its own): ours with 2 workers routing by cache (the default), ours
routing by load only (LLM_ROUTE_BY_CACHE=0), and 2 llama-server instances behind
nginx (deploy/nginx, least connections). Each conversation has a system prompt of its
own; the figures are the time to first token of turns 2-4 and the prompt tokens
evaluated again rather than read from a cache.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from app.settings.values import default_model_path
from bench import references
from bench.run import add_output_options, progress, publish, rotate
from bench.workloads import CODE
from harness import llama_server
from harness.servers import Service, nginx

BY_CACHE, BY_LOAD, CPP = "ours, routed by cache", "ours, routed by load", "2 llama-servers behind nginx"
TOPICS = ("rivers", "volcanoes", "bees", "clocks", "bridges", "comets", "tides", "glaciers")
QUESTIONS = ("What is it?", "How does it change over time?", "Give me an example.", "Why does it matter?")


def system_prompt(conversation: int, topic: str) -> str:
    """A system prompt of its own (~500 tokens): the only cache a turn may hit is its own history."""
    return f"Conversation {conversation}. You teach about {topic}. Reference material:\n{CODE[:1600]}"


def turn(url: str, messages: list[dict[str, str]], max_tokens: int) -> tuple[float, int, int, str]:
    """One streamed turn on a fresh connection: (time to first token, prompt tokens, cached, text)."""
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}  # fmt: skip
    started, first, text, prompt, cached = time.perf_counter(), None, "", 0, 0
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=600) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            for choice in chunk.get("choices", []):
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    first = first or time.perf_counter()
                    text += piece
            if chunk.get("usage"):
                prompt = chunk["usage"]["prompt_tokens"]
                cached = (chunk["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", 0)
            if "timings" in chunk:  # llama-server says what it read from its cache here
                cached = chunk["timings"].get("cache_n", cached)
    return (first or time.perf_counter()) - started, prompt, cached, text


def conversation(url: str, number: int, turns: int, max_tokens: int) -> list[tuple[float, int, int]]:
    topic = TOPICS[number % len(TOPICS)]
    messages = [{"role": "system", "content": system_prompt(number, topic)}]
    results = []
    for question in QUESTIONS[:turns]:
        messages.append({"role": "user", "content": question})
        ttft, prompt, cached, text = turn(url, messages, max_tokens)
        messages.append({"role": "assistant", "content": text})
        results.append((ttft, prompt, cached))
    return results


def run(url: str, first: int, args: argparse.Namespace) -> list[list[tuple[float, int, int]]]:
    with ThreadPoolExecutor(args.conversations) as pool:
        numbers = range(first, first + args.conversations)
        return list(pool.map(lambda n: conversation(url, n, args.turns, args.max_tokens), numbers))


def start(args: argparse.Namespace) -> dict[str, list[Service]]:
    started: dict[str, list[Service]] = {}
    threads = max(1, args.threads // 2)
    try:
        for name, routing in ((BY_CACHE, "1"), (BY_LOAD, "0")):
            env = {"LLM_PARALLEL": str(args.slots), "LLM_ROUTE_BY_CACHE": routing}
            env["LLM_MODEL_PATH"] = args.model
            started[name] = [references.ours(2, threads, args.n_ctx, **env)]
        servers = [
            llama_server.start(args.model, threads, args.slots, args.n_ctx, stock=True) for _ in range(2)
        ]
        started[CPP] = [nginx([s.port for s in servers]), *servers]
    except BaseException:
        for services in started.values():
            for service in services:
                service.stop()
        raise
    return started


def markdown(args: argparse.Namespace, results: dict[str, list]) -> str:
    lines = [
        f"Model `{Path(args.model).name}`, 2 workers (or instances) of {args.slots} sequences and "
        f"{max(1, args.threads // 2)} thread each; {args.conversations} conversations at once, {args.turns} "
        f"turns each, {args.max_tokens} tokens per answer; {args.repeats} interleaved rounds.",
        "",
        "| target | TTFT p50 of turn 1, ms | TTFT p50 of turns 2+, ms | turns 2+: prompt tokens re-read |",
        "|---|---|---|---|",
    ]
    later: dict[str, float] = {}
    for name, rounds in results.items():
        firsts = [c[0][0] for r in rounds for c in r]
        rest = [t for r in rounds for c in r for t in c[1:]]
        later[name] = statistics.median(t[0] for t in rest)
        again = sum(t[1] - t[2] for t in rest)
        total = sum(t[1] for t in rest)
        lines.append(f"| {name} | {1000 * statistics.median(firsts):.0f} | {1000 * later[name]:.0f} | "
                     f"{again} of {total} ({100 * again / max(total, 1):.0f}%) |")  # fmt: skip
    ours, load, cpp = (1000 * later[name] for name in (BY_CACHE, BY_LOAD, CPP))
    lines += ["", "### Targets", "", "| target | measured | verdict |", "|---|---|---|"]
    ratio = ours / load
    verdict = "met" if ratio <= 0.5 else f"missed by {ratio - 0.5:.2f}"
    lines.append(f"| TTFT p50 of later turns at most 0.5× routing by load | {ours:.0f} against {load:.0f} ms "
                 f"({ratio:.2f}×) | {verdict} |")  # fmt: skip
    verdict = "met" if ours <= cpp else f"missed by {ours - cpp:.0f} ms"
    lines.append(f"| TTFT p50 of later turns no worse than 2 llama-servers behind nginx | {ours:.0f} against "
                 f"{cpp:.0f} ms | {verdict} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=default_model_path())
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--slots", type=int, default=4, help="sequences per worker and slots per llama-server"
    )
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--conversations", type=int, default=8)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    add_output_options(parser)
    args = parser.parse_args(argv)
    started = start(args)
    numbers = itertools.count(0, args.conversations)
    results: dict[str, list] = {name: [] for name in started}
    try:
        for repeat in range(args.repeats):
            progress(f"round {repeat + 1} of {args.repeats}")
            for name in rotate(list(started), repeat):
                results[name].append(run(started[name][0].url, next(numbers), args))
    finally:
        for services in started.values():
            for service in services:
                service.stop()
    text = markdown(args, results)
    publish(text, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
