"""Benchmark: what cache isolation costs when tenants share a system prompt (LLM_CACHE_SHARING).

    python -m bench.tenants --rounds 3 --record

Four API keys send the same long system prompt (instructions and a file, ~1,350 tokens),
each with its own question, then each a second turn. Two servers side by side, one
request at a time, interleaved: isolated by key (the default) and shared by every key
(LLM_CACHE_SHARING=all, the cross-tenant leak issue 59 measured). The figures: prompt tokens
each turn evaluates (the rest came from the cache) and the time to its answer's first token.
Isolation costs each further tenant's first turn a full evaluation of the shared prompt; its
later turns resume its own cache as before.
"""

from __future__ import annotations

import argparse
import statistics
import time

import httpx

from bench.references import ours
from bench.run import add_output_options, progress, publish, rotate
from bench.workloads import CODE

KEYS = {f"tenant-{n}": f"sk-tenant-{n}-bench" for n in range(1, 5)}
MODES = {"isolated by key (default)": "key", "shared by all keys": "all"}


def turn(url: str, key: str, messages: list[dict[str, str]]) -> tuple[int, float]:
    """(prompt tokens evaluated, seconds to the answer, one token long: its first token)."""
    started = time.perf_counter()
    answer = httpx.post(url + "/v1/chat/completions", headers={"Authorization": f"Bearer {key}"}, timeout=600,
                        json={"messages": messages, "max_tokens": 1, "temperature": 0})  # fmt: skip
    elapsed = time.perf_counter() - started
    assert answer.status_code == 200, answer.text
    return int(answer.json()["timings"]["prompt_n"]), elapsed


def round_of(url: str, number: int) -> dict[str, list[tuple[int, float]]]:
    """Every tenant's first turn, then every tenant's second, on a system prompt new to this round."""
    system = f"Round {number}. You review code for a team; answer briefly.\n{CODE}\n{CODE}\n{CODE}"
    first, others, second = "first tenant, turn 1", "other tenants, turn 1", "every tenant, turn 2"
    seen: dict[str, list[tuple[int, float]]] = {first: [], others: [], second: []}

    def opening(place: int) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": f"Tenant {place}: what is it?"},
        ]

    for place, key in enumerate(KEYS.values()):
        seen[first if place == 0 else others].append(turn(url, key, opening(place)))
    follow = [{"role": "assistant", "content": "A"}, {"role": "user", "content": "And its first function?"}]
    for place, key in enumerate(KEYS.values()):
        seen[second].append(turn(url, key, opening(place) + follow))
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    add_output_options(parser)
    args = parser.parse_args()
    keys = ",".join(f"{name}:{key}" for name, key in KEYS.items())
    servers = {name: ours(1, args.threads, 4096, LLM_API_KEYS=keys, LLM_CACHE_SHARING=mode)
               for name, mode in MODES.items()}  # fmt: skip
    figures: dict[str, dict[str, list[tuple[int, float]]]] = {name: {} for name in servers}
    try:
        for number in range(args.rounds):
            for name in rotate(list(servers), number):
                progress(f"round {number + 1}: {name}")
                for part, values in round_of(servers[name].url, number * 10 + len(name)).items():
                    figures[name].setdefault(part, []).extend(values)
    finally:
        for server in servers.values():
            server.stop()
    lines = ["| server | turn | prompt tokens evaluated (median) | time to first token, ms (median) |",
             "|---|---|---:|---:|"]  # fmt: skip
    for name, parts in figures.items():
        for part, values in parts.items():
            tokens = statistics.median(v[0] for v in values)
            ms = statistics.median(v[1] for v in values) * 1000
            lines.append(f"| {name} | {part} | {tokens:.0f} | {ms:.0f} |")
    header = (f"SmolLM2-135M-Instruct Q4_1, one worker, {args.threads} threads, {len(KEYS)} keys, "
              f"{args.rounds} rounds interleaved, one request at a time.\n\n")  # fmt: skip
    publish(header + "\n".join(lines) + "\n", args)


if __name__ == "__main__":
    main()
