"""Benchmark: a question about an image, and what it costs the streams already running, beside llama-server.

    python -m bench.vision --repeats 3 --record

SmolLM2 with a random-weight projector of llama.cpp's Gemma 3 type, as big as a small real one
(BENCH in harness/tiny_projector.py: a ViT-B-sized encoder over 448 px images, 64 image tokens), on
ours and on llama-server built from the pinned sdist, the same kernels, interleaved repeats:
- time to first token of a one-image question, cold (an image neither has seen) and as a
  follow-up (the same image, a second question: its cells come from the cache);
- three text streams generating while a fourth request brings an image: the longest gap
  between two of their tokens while the image is encoded and evaluated, against their
  median gap before it.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import random
import statistics
import sys
import threading
import time
from typing import Any

import httpx
from PIL import Image

from app.settings.values import default_model_path
from bench import references
from bench.run import add_output_options, progress, publish, rotate
from harness import llama_server, tiny_projector
from harness.servers import Service

OURS, CPP = "ours", "llama-server"


def start(args: argparse.Namespace, projector: str) -> dict[str, Service]:
    model = default_model_path()
    started: dict[str, Service] = {}
    try:
        started[OURS] = references.ours(
            1,
            args.threads,
            args.n_ctx,
            LLM_MMPROJ=projector,
            LLM_PARALLEL="4",
            LLM_MAX_BODY_BYTES=str(16 << 20),
        )
        extra = ("--mmproj", projector, "--swa-full")
        started[CPP] = llama_server.start(
            model, args.threads, 4, args.n_ctx, extra, same_kernels=True, stock=True
        )
    except BaseException:
        for service in started.values():
            service.stop()
        raise
    return started


def image(seed: int) -> str:
    """A data URL of a photo-sized PNG of noise, different for every seed."""
    pixels = random.Random(seed).randbytes(320 * 240 * 3)
    out = io.BytesIO()
    Image.frombytes("RGB", (320, 240), pixels).resize((640, 480)).save(out, format="PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


def asking(url: str, question: str) -> list[dict[str, Any]]:
    parts = [{"type": "text", "text": question}, {"type": "image_url", "image_url": {"url": url}}]
    return [{"role": "user", "content": parts}]


def stream(
    base: str, messages: list[dict[str, Any]], tokens: int, stamps: list[float] | None = None
) -> float:
    """A streamed chat completion; returns its time to first token, appending each token's time."""
    body = {"messages": messages, "max_tokens": tokens, "temperature": 0, "stream": True}
    if tokens > 32:
        body["ignore_eos"] = True
    started, first = time.perf_counter(), None
    with httpx.stream("POST", base + "/v1/chat/completions", json=body, timeout=600) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: {") and json.loads(line[6:])["choices"]:
                now = time.perf_counter()
                first = first or now
                if stamps is not None:
                    stamps.append(now)
    return (first or time.perf_counter()) - started


def questions(base: str, seed: int) -> tuple[float, float]:
    """Time to first token of a new image's question, and of a follow-up about the same image."""
    url = image(seed)
    cold = stream(base, asking(url, "What is in this picture?"), 4)
    follow_up = asking(url, "What is in this picture?") + [
        {"role": "assistant", "content": "A picture."},
        {"role": "user", "content": "Which colours?"},
    ]
    return cold, stream(base, follow_up, 4)


def beside_streams(base: str, seed: int, tokens: int) -> tuple[float, float]:
    """Three text streams' median gap between tokens before an image arrives, and their longest gap
    while it is evaluated (from its request to its first token)."""
    stamps: list[list[float]] = [[] for _ in range(3)]
    runners = [
        threading.Thread(
            target=stream, args=(base, [{"role": "user", "content": f"Story {seed}.{n}:"}], tokens, stamps[n])
        )
        for n in range(3)
    ]
    for runner in runners:
        runner.start()
    while min(len(s) for s in stamps) < 16:  # every stream is generating
        time.sleep(0.01)
    sent = time.perf_counter()
    answered = sent + stream(base, asking(image(seed), "Describe it."), 2)
    for runner in runners:
        runner.join()
    before = [b - a for s in stamps for a, b in zip(s, s[1:], strict=False) if b < sent]
    during = [b - a for s in stamps for a, b in zip(s, s[1:], strict=False) if b > sent and a < answered]
    return statistics.median(before), max(during, default=0.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--questions", type=int, default=3, help="per target and repeat")
    parser.add_argument("--stream-tokens", type=int, default=160)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--tiny", action="store_true", help="the tests' 64 px projector (a smoke run)")
    add_output_options(parser)
    args = parser.parse_args(argv)
    shape = tiny_projector.TINY if args.tiny else tiny_projector.BENCH
    projector = str(tiny_projector.cached(default_model_path(), shape=shape))
    servers = start(args, projector)
    figures: dict[str, dict[str, list[float]]] = {
        name: {"cold": [], "follow-up": [], "gap before": [], "gap during": []} for name in servers
    }
    try:
        seed = 0
        for repeat in range(args.repeats):
            for name in rotate(list(servers), repeat):
                progress(f"round {repeat + 1}: {name}")
                for _ in range(args.questions):
                    seed += 1  # an image of its own: neither server has seen it
                    cold, follow_up = questions(servers[name].url, seed)
                    figures[name]["cold"].append(cold)
                    figures[name]["follow-up"].append(follow_up)
                seed += 1
                before, during = beside_streams(servers[name].url, seed, args.stream_tokens)
                figures[name]["gap before"].append(before)
                figures[name]["gap during"].append(during)
    finally:
        for service in servers.values():
            service.stop()
    publish(report(args, shape, figures), args)
    return 0


def report(
    args: argparse.Namespace, shape: tiny_projector.Shape, figures: dict[str, dict[str, list[float]]]
) -> str:
    median = {
        name: {k: statistics.median(v) * 1000 for k, v in kinds.items()} for name, kinds in figures.items()
    }
    lines = [
        f"SmolLM2 with a random-weight Gemma 3 type projector ({shape.image} px, {shape.layers} layers of "
        f"{shape.embd}, {shape.image_tokens} image tokens), {args.threads} threads each, the same kernels, "
        f"{args.repeats} repeats interleaved, medians (ms).",
        "",
        "| target | TTFT, new image | TTFT, same image again | streams' gap before "
        "| streams' longest gap during an image |",
        "|---|---|---|---|---|",
    ]
    for name, m in median.items():
        cells = (m["cold"], m["follow-up"], m["gap before"], m["gap during"])
        lines.append(f"| {name} | " + " | ".join(f"{v:.0f}" for v in cells) + " |")
    lines += ["", "| target | measured | verdict |", "|---|---|---|"]
    for kind, label in (("cold", "TTFT of a new image's question"), ("follow-up", "TTFT of a follow-up")):
        ratio = median[OURS][kind] / median[CPP][kind]
        lines.append(
            f"| {label} at most llama-server's | {ratio:.2f}x | {'met' if ratio <= 1.0 else 'missed'} |"
        )
    ratio = median[OURS]["gap during"] / median[CPP]["gap during"]
    lines.append(
        f"| running streams' longest gap during an image at most llama-server's | {ratio:.2f}x | "
        f"{'met' if ratio <= 1.0 else 'missed'} |"
    )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
