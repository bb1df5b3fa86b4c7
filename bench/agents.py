"""Benchmark: coding agents' sessions, recorded then replayed request by request, beside a stock llama-server.

    python -m bench.agents --repeats 3 --record

Recording: Claude Code, Codex CLI and opencode (harness/agents.py) each run a session of two
turns through a recording proxy that answers every request itself (harness/agent_answers.py):
the first turn's answer is a call of the agent's file-reading tool, which the agent runs and
answers with its result, then text; the second turn continues the session. So each session
is the agent's own requests (77, 40 and 31 KB as its system prompt and tools make them), the
same for every target, recorded with no model at all.

Replay: each recorded request, in order, streamed to each target with its model named and its
answer cut to --max-tokens (and the agent's session header): ours (defaults) and llama-server
built as users build it (stock options, harness/llama_server.py), both on the same model (Gemma
3 270M: its 32k window holds the agents' prompts) and the same tool-capable chat template
(bench/templates/chatml-tools.jinja: the model's own has no tool section, which llama-server
leaves the tools out for), two sequences of the whole window each, --threads threads. The
figures per request: time to first token (the first generated token's event), prompt tokens
and how many came from the cache, as each server's usage reports them. Every repeat starts
both servers anew (nothing cached) and alternates which goes first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench import references
from bench.run import add_output_options, progress, publish, rotate
from harness import agent_answers, agents, llama_server, real_models
from harness.recording_proxy import Exchange, RecordingProxy
from harness.servers import Service

OURS, REPRO, CPP = "ours", "ours, LLM_BATCH_INVARIANT=1", "llama-server"
BUILDS = {"stock": "as users build it (upstream's default options; AMX off, which crashes on some CPUs)",
          "same-kernels": "with our wheel's options (for a smoke run: no speed claim)"}  # fmt: skip
NOTES = "notes.txt"
PROMPTS = ("Read notes.txt and tell me what it says.", "Thanks. Now say goodbye.")
TEMPLATE = Path(__file__).parent / "templates" / "chatml-tools.jinja"


def record(agent: str, folder: Path, model: str) -> list[Exchange]:
    """One session of `agent` (two turns, a tool run in the first), its POSTs as it sent them."""
    work = folder / agent / "work"
    work.mkdir(parents=True)
    (work / NOTES).write_text("The notes say: remember the milk.\n")
    called = threading.Event()

    def answer(exchange: Exchange) -> tuple[int, str, bytes]:
        tools = bool(exchange.json().get("tools")) if exchange.body else False
        if tools and not called.is_set():
            called.set()
            chosen = agent_answers.file_read(agent, work / NOTES)
        else:
            chosen = agent_answers.text("Done.")
        return 200, "text/event-stream", agent_answers.stream_for(exchange.path, model, chosen)

    with RecordingProxy(upstream=None, script=answer) as proxy:
        session = agents.Session(agent, folder / agent / "home", work, proxy.url, model)
        for number, prompt in enumerate(PROMPTS):
            run = session.turn(prompt, again=number > 0)
            if run.returncode != 0:
                raise RuntimeError(f"{agent} turn {number + 1} failed: {run.stderr[-2000:]}")
    return [e for e in proxy.exchanges if e.method == "POST" and e.body]


@dataclass(frozen=True)
class Replayed:
    """One request on one target: time to first token, prompt tokens, of which from the cache."""

    ttft: float
    prompt: int
    cached: int


def replay(url: str, exchange: Exchange, model: str, max_tokens: int) -> Replayed:
    """Send a recorded request again, as the agent streamed it, to `url`, and time its first token."""
    body: dict[str, Any] = {**exchange.json(), "model": model, "stream": True}
    body["max_output_tokens" if exchange.path.startswith("/v1/responses") else "max_tokens"] = max_tokens
    body.pop("max_completion_tokens", None)
    if exchange.path.startswith("/v1/chat"):
        body["stream_options"] = {"include_usage": True}
    kept = ("content-type", "anthropic-version", "anthropic-beta", "x-claude-code-session-id")
    headers = {k: v for k, v in exchange.headers.items() if k.lower() in kept}
    started, first = time.perf_counter(), None
    usage: dict[str, Any] = {}
    with httpx.stream("POST", url + exchange.path, json=body, headers=headers, timeout=3600) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{url}{exchange.path}: {response.status_code} {response.read()[:500]!r}")
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            event = json.loads(line[6:])
            if first is None and _generated(event):
                first = time.perf_counter()
            usage = {**usage, **(_usage(event) or {})}  # llama-server's message_delta has output_tokens only
    prompt, cached = _counts(usage)
    return Replayed((first or time.perf_counter()) - started, prompt, cached)


def _generated(event: dict[str, Any]) -> bool:
    """Whether an event carries the first generated token (text, thinking or a call's arguments)."""
    kind = event.get("type", "")
    if kind == "content_block_delta" or kind.endswith(".delta"):
        return True
    return any(choice.get("delta", {}).get(k) for choice in event.get("choices", [])
               for k in ("content", "reasoning_content", "tool_calls"))  # fmt: skip


def _usage(event: dict[str, Any]) -> dict[str, Any] | None:
    """The usage an event reports, in whichever protocol (with llama-server's timings, if it sends them)."""
    found = event.get("usage") or (event.get("response") or {}).get("usage")
    if event.get("type") == "message_start":
        found = event["message"].get("usage")
    if found and "timings" in event:
        found = {**found, "timings": event["timings"]}
    return found if isinstance(found, dict) else None


def _counts(usage: dict[str, Any]) -> tuple[int, int]:
    """(prompt tokens, of which read from a cache) from any protocol's usage."""
    timings = usage.get("timings") or {}
    if "prompt_n" in timings:  # llama-server's own figures: evaluated now, and from its cache
        return timings["prompt_n"] + timings.get("cache_n", 0), timings.get("cache_n", 0)
    if "input_tokens_details" in usage:  # Responses
        return usage["input_tokens"], usage["input_tokens_details"].get("cached_tokens", 0)
    if "prompt_tokens" in usage:  # chat completions
        return usage["prompt_tokens"], (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    read = usage.get("cache_read_input_tokens") or 0  # Anthropic's: the three parts of the input
    return usage.get("input_tokens", 0) + (usage.get("cache_creation_input_tokens") or 0) + read, read


def start(args: argparse.Namespace) -> dict[str, Service]:
    """Both targets on the model, with nothing cached."""
    started: dict[str, Service] = {}
    try:
        # One tool-capable template for both: the model's own has no tool section, which llama-server
        # then leaves the tools out of and ours renders, so their prompts differed threefold.
        template = TEMPLATE.read_text()
        model = {"id": args.model_id, "path": args.model, "parallel": args.slots, "chat_template": template}
        settings = {"LLM_MODELS": json.dumps([model])}
        started[OURS] = references.ours(1, args.threads, args.n_ctx, **settings)
        if args.reproducible:  # what the batch-invariant kernels cost, beside the rest
            started[REPRO] = references.ours(1, args.threads, args.n_ctx, **settings, LLM_BATCH_INVARIANT="1")
        stock = args.llama_server == "stock"
        extra = ("--alias", args.model_id, "--jinja", "--chat-template-file", str(TEMPLATE))
        started[CPP] = llama_server.start(
            args.model, args.threads, args.slots, args.n_ctx, extra, stock=stock
        )
    except BaseException:
        for service in started.values():
            service.stop()
        raise
    return started


def markdown(args: argparse.Namespace, sessions: dict[str, list[Exchange]],
             results: dict[str, dict[str, list[list[Replayed]]]]) -> str:  # fmt: skip
    built = BUILDS[args.llama_server]
    targets = list(results)
    lines = [
        f"Model `{Path(args.model).name}`, a window of {args.n_ctx} tokens, {args.slots} sequences, "
        f"llama-server built {built}, "
        f"{args.threads} threads; each agent's session of {len(PROMPTS)} turns replayed request by "
        f"request, answers cut to {args.max_tokens} tokens; {args.repeats} rounds, each on servers "
        "started anew; medians. TTFT: time to the first generated token. Evaluated: prompt tokens not "
        "read from a cache, as the server's own usage reports them.",
        "",
        "| agent | request | "
        + " | ".join(f"{t}: TTFT ms | {t}: prompt / evaluated" for t in targets)
        + " |",
        "|---|---|" + "---|---|" * len(targets),
    ]
    verdicts = []
    for agent, recorded in sessions.items():
        for n, exchange in enumerate(recorded):
            cells = []
            medians = {}
            for target in targets:
                runs = [rounds[n] for rounds in results[target][agent]]
                medians[target] = 1000 * statistics.median(r.ttft for r in runs)
                prompt = statistics.median(r.prompt for r in runs)
                evaluated = statistics.median(r.prompt - r.cached for r in runs)
                cells += [f"{medians[target]:.0f}", f"{prompt:.0f} / {evaluated:.0f}"]
            size = len(exchange.body) // 1024
            lines.append(
                f"| {agent} | {n + 1} ({exchange.path.split('?')[0]}, {size} KB) | "
                + " | ".join(cells)
                + " |"
            )
            if n > 0:
                verdicts.append((agent, n + 1, medians[OURS], medians[CPP]))
    lines += ["", "### Targets", "", "| target | measured | verdict |", "|---|---|---|"]
    for agent, number, ours, cpp in verdicts:
        verdict = "met" if ours <= cpp else f"missed by {ours - cpp:.0f} ms"
        lines.append(f"| {agent}, request {number}: TTFT at or below llama-server's | {ours:.0f} against "
                     f"{cpp:.0f} ms | {verdict} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a GGUF with a window that holds the agents' prompts")
    parser.add_argument("--model-id", default="agents-model")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=32768)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--agents", nargs="+", default=list(agents.AGENTS), choices=agents.AGENTS)
    parser.add_argument(
        "--llama-server", choices=("stock", "same-kernels"), default="stock",
        help="stock: built as users build it (for speed); same-kernels: as our wheel (built for the tests)",
    )  # fmt: skip
    parser.add_argument("--reproducible", action="store_true", help="also ours with LLM_BATCH_INVARIANT=1")
    add_output_options(parser)
    args = parser.parse_args(argv)
    args.model = args.model or str(real_models.gemma3_path())
    with tempfile.TemporaryDirectory(prefix="bench-agents-") as folder:
        progress("recording the agents' sessions")
        sessions = {agent: record(agent, Path(folder), args.model_id) for agent in args.agents}
    targets = [OURS, *([REPRO] if args.reproducible else []), CPP]
    results: dict[str, dict[str, list[list[Replayed]]]] = {t: {a: [] for a in sessions} for t in targets}
    for repeat in range(args.repeats):
        progress(f"round {repeat + 1} of {args.repeats}")
        started = start(args)
        try:
            order = rotate(targets, repeat)
            for agent, recorded in sessions.items():
                for target in order:
                    url = started[target].url
                    results[target][agent].append(
                        [replay(url, e, args.model_id, args.max_tokens) for e in recorded]
                    )
        finally:
            for service in started.values():
                service.stop()
    publish(markdown(args, sessions, results), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
