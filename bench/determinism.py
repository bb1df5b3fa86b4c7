"""How often batching and the prompt cache change a temperature-0 answer, and what the cache saves.

    python -m bench.determinism --prompts 32 --record

llama.cpp's arithmetic depends on the shape of a batch, so the same request may not
give the same text alone and beside others, or from a cold and a cached prompt. This
measures how often, on the real server, for chat prompts of their own:
- alone against beside three other streams (prompt cache off, so only batching differs);
- a cold prompt against the same prompt again from the cache (alone);
and the time to first token of a chat's second turn with the cache and without.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time

import httpx

from bench import references
from bench.run import add_output_options, publish
from harness.servers import Server

QUESTIONS = [
    "Name a colour.", "What is rain?", "Describe a cat.", "Why is the sky blue?", "Say something kind.",
    "What is a river?", "Name a fruit.", "How do birds fly?", "What is music?", "Describe the sea.",
    "What is a tree?", "Name a planet.", "Why do we sleep?", "What is bread?", "Describe winter.",
    "What is a computer?",
]  # fmt: skip


def question(index: int) -> list[dict[str, str]]:
    topic = QUESTIONS[index % len(QUESTIONS)]
    return [{"role": "user", "content": f"Question {index}: {topic} Answer in two sentences."}]


def answer(url: str, messages: list[dict[str, str]], max_tokens: int) -> tuple[str, float]:
    """The temperature-0 answer and the seconds to its first token (streamed)."""
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True}
    text, first = "", None
    sent = time.perf_counter()
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=300) as response:
        for line in response.iter_lines():
            if line.startswith("data: {"):
                choices = json.loads(line[6:])["choices"]
                piece = choices[0]["delta"].get("content") if choices else None
                if piece:
                    first = first or time.perf_counter() - sent
                    text += piece
    return text, first or 0.0


def beside_others(url: str, messages: list[dict[str, str]], max_tokens: int, others: int) -> str:
    """The answer while `others` other streams generate in the same batch."""
    stop = threading.Event()

    def chatter(index: int) -> None:
        while not stop.is_set():
            answer(url, question(1000 + index), max_tokens)

    threads = [threading.Thread(target=chatter, args=(i,)) for i in range(others)]
    for thread in threads:
        thread.start()
    try:
        return answer(url, messages, max_tokens)[0]
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=2)
    add_output_options(parser)
    args = parser.parse_args(argv)
    lines = [
        f"{args.prompts} chat prompts of their own, temperature 0, {args.max_tokens} tokens, 4 sequences.",
        "",
    ]

    no_cache = references.ours(1, args.threads, 2048, LLM_PROMPT_CACHE="0")
    try:
        alone = [answer(no_cache.url, question(i), args.max_tokens)[0] for i in range(args.prompts)]
        batched = [beside_others(no_cache.url, question(i), args.max_tokens, 3) for i in range(args.prompts)]
        again = [answer(no_cache.url, question(i), args.max_tokens)[0] for i in range(args.prompts)]
    finally:
        no_cache.stop()
    repeat_differs = sum(a != b for a, b in zip(alone, again, strict=True))
    batch_differs = sum(a != b for a, b in zip(alone, batched, strict=True))
    lines.append(f"- alone, run twice: {repeat_differs} of {args.prompts} answers differ")
    lines.append(f"- alone against beside 3 other streams: {batch_differs} of {args.prompts} answers differ")

    cached = references.ours(1, args.threads, 2048, LLM_PROMPT_CACHE="1")
    try:
        cold = [answer(cached.url, question(i), args.max_tokens)[0] for i in range(args.prompts)]
        warm = [answer(cached.url, question(i), args.max_tokens)[0] for i in range(args.prompts)]
        cache_differs = sum(a != b for a, b in zip(cold, warm, strict=True))
        lines.append(
            f"- cold prompt against the same prompt from the cache: {cache_differs} of {args.prompts} differ"
        )
        # The same, when the cached cells were computed while other streams ran beside (other batch shapes).
        offset = 500
        for i in range(args.prompts):
            beside_others(cached.url, question(offset + i), args.max_tokens, 3)
        reused = [answer(cached.url, question(offset + i), args.max_tokens)[0] for i in range(args.prompts)]
        reference = [alone_cold(args, question(offset + i)) for i in range(args.prompts)]
        shaped = sum(a != b for a, b in zip(reference, reused, strict=True))
        lines.append(
            "- cold prompt alone against the same prompt from a cache filled beside 3 other streams: "
            f"{shaped} of {args.prompts} differ"
        )
        turns = {"cache on": second_turns(cached.url, args)}
    finally:
        cached.stop()
    no_cache = references.ours(1, args.threads, 2048, LLM_PROMPT_CACHE="0")
    try:
        turns["cache off"] = second_turns(no_cache.url, args)
    finally:
        no_cache.stop()
    if "server" in _COLD:
        _COLD.pop("server").stop()
    for name, ttfts in turns.items():
        lines.append(
            f"- time to first token of a chat's second turn, {name}: {1000 * statistics.median(ttfts):.0f} ms"
        )
    text = "\n".join(lines) + "\n"
    publish(text, args)
    return 0


_COLD: dict[str, Server] = {}


def alone_cold(args: argparse.Namespace, messages: list[dict[str, str]]) -> str:
    """The answer from a server without the prompt cache, alone (the reference)."""
    if "server" not in _COLD:
        _COLD["server"] = references.ours(1, args.threads, 2048, LLM_PROMPT_CACHE="0")
    return answer(_COLD["server"].url, messages, args.max_tokens)[0]


def second_turns(url: str, args: argparse.Namespace) -> list[float]:
    """TTFT of the second turn of conversations whose first turn has a long system prompt."""
    system = {"role": "system", "content": "You are a patient teacher. " * 60}  # ~400 tokens
    ttfts = []
    for index in range(8):
        first = [system, *question(index)]
        reply, _ = answer(url, first, args.max_tokens)
        second = [*first, {"role": "assistant", "content": reply}, {"role": "user", "content": "Say more."}]
        ttfts.append(answer(url, second, 4)[1])
    return ttfts


if __name__ == "__main__":
    sys.exit(main())
