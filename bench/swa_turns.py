"""Benchmark: a sliding-window model's next turn, resumed from a context checkpoint or evaluated again.

    python -m bench.swa_turns --repeats 3 --record

Gemma 3 270M (a window of 512) behind four targets, side by side, interleaved: ours at its
defaults (LLM_SWA_FULL=1, a full-size window cache: any prefix resumes, no checkpoints needed),
ours with a window-size cache as llama-server's (LLM_SWA_FULL=0) with context checkpoints
(LLM_CTX_CHECKPOINTS=8) and without (a prefix the window has moved past is evaluated again),
and llama-server at its defaults (checkpoints, window-size cache). Each conversation has a
long first turn (a ~1,000-token document and a question), a long answer that moves the
window past the prompt's end, then two kinds of second turn whose time to first token is
measured:
- "regenerate": the same first turn again (the window no longer holds its end: a
  checkpoint, or everything again);
- "next turn": the history, the answer and a new question (the live window resumes it).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time

import httpx

from bench import references
from bench.run import add_output_options, progress, publish, rotate
from harness import llama_server
from harness.real_models import gemma3_path
from harness.servers import Service

CHECKPOINTS, FULL, SWA_FULL, CPP = (
    "ours, LLM_SWA_FULL=0, checkpoints",
    "ours, LLM_SWA_FULL=0, no checkpoints",
    "ours (LLM_SWA_FULL=1)",
    "llama-server",
)
WORDS = "river lantern orchard meadow stone bridge harbour winter candle storm valley tower garden".split()
TARGET_FASTER = 2.0  # a checkpoint restore should make a regenerated turn at least this much faster


def start(args: argparse.Namespace) -> dict[str, Service]:
    model = str(gemma3_path())
    settings = {"LLM_MODEL_PATH": model, "LLM_PARALLEL": "2", "LLM_SWA_FULL": "0"}
    started: dict[str, Service] = {}
    try:
        started[CHECKPOINTS] = references.ours(1, args.threads, args.n_ctx, **settings)
        started[FULL] = references.ours(1, args.threads, args.n_ctx, **settings, LLM_CTX_CHECKPOINTS="0")
        started[SWA_FULL] = references.ours(1, args.threads, args.n_ctx, **{**settings, "LLM_SWA_FULL": "1"})
        started[CPP] = llama_server.start(model, args.threads, 2, args.n_ctx, stock=True)
    except BaseException:
        for service in started.values():
            service.stop()
        raise
    return started


def streamed(url: str, prompt: str, max_tokens: int) -> tuple[float, str]:
    """A streamed text completion: (time to first text, the text)."""
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True}
    started, first, text = time.perf_counter(), None, ""
    with httpx.stream("POST", url + "/v1/completions", json=body, timeout=600) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: {"):
                piece = json.loads(line[6:])["choices"][0].get("text")
                if piece:
                    first = first or time.perf_counter()
                    text += piece
    return (first or time.perf_counter()) - started, text


def conversation(url: str, seed: int, answer_tokens: int, words: int) -> dict[str, float]:
    rng = random.Random(seed)
    document = " ".join(rng.choice(WORDS) for _ in range(words))
    first_turn = f"Document {seed}: {document}\nQuestion: which words come most often?\nAnswer:"
    _, answer = streamed(url, first_turn, answer_tokens)
    regenerate, _ = streamed(url, first_turn, 8)
    _, answer = streamed(url, first_turn, answer_tokens)  # the window moves on again
    next_turn, _ = streamed(url, f"{first_turn}{answer}\nQuestion: and least often?\nAnswer:", 8)
    return {"regenerate": regenerate, "next turn": next_turn}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--conversations", type=int, default=2, help="per target and repeat")
    parser.add_argument("--answer-tokens", type=int, default=600)
    parser.add_argument("--document-words", type=int, default=900, help="the first turn's document")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=4096)
    add_output_options(parser)
    args = parser.parse_args(argv)
    servers = start(args)
    ttfts: dict[str, dict[str, list[float]]] = {name: {"regenerate": [], "next turn": []} for name in servers}
    try:
        seed = 0
        for repeat in range(args.repeats):
            for name in rotate(list(servers), repeat):
                progress(f"round {repeat + 1}: {name}")
                for _ in range(args.conversations):
                    seed += 1  # a document of its own: no conversation reads another's cache
                    turns = conversation(servers[name].url, seed, args.answer_tokens, args.document_words)
                    for kind, seconds in turns.items():
                        ttfts[name][kind].append(seconds)
    finally:
        for service in servers.values():
            service.stop()
    publish(report(args, ttfts), args)
    return 0


def report(args: argparse.Namespace, ttfts: dict[str, dict[str, list[float]]]) -> str:
    lines = [
        f"Gemma 3 270M, {args.threads} threads, {args.conversations} conversations per target and repeat, "
        f"{args.repeats} repeats interleaved; a ~1,000-token first turn answered in {args.answer_tokens} "
        "tokens. Time to first token of the second turn, median (ms).",
        "",
        "| target | regenerate (window moved on) | next turn (window still holds it) |",
        "|---|---|---|",
    ]
    median = {
        name: {kind: statistics.median(v) * 1000 for kind, v in kinds.items()}
        for name, kinds in ttfts.items()
    }
    for name, kinds in median.items():
        lines.append(f"| {name} | {kinds['regenerate']:.0f} | {kinds['next turn']:.0f} |")
    faster = median[FULL]["regenerate"] / median[CHECKPOINTS]["regenerate"]
    versus = median[CHECKPOINTS]["regenerate"] / median[CPP]["regenerate"]
    verdict = "met" if faster >= TARGET_FASTER else "missed"
    lines += [
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
        f"| a checkpoint makes a regenerated turn at least {TARGET_FASTER:.0f}x faster than evaluating "
        f"it again | {faster:.1f}x | {verdict} |",
        f"| (reference) ours with checkpoints against llama-server's, regenerate | {versus:.2f}x | — |",
    ]
    for kind in ("regenerate", "next turn"):
        ratio = median[SWA_FULL][kind] / median[CPP][kind]
        lines.append(
            f"| (reference) ours at its defaults against llama-server's, {kind} | {ratio:.2f}x | — |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
