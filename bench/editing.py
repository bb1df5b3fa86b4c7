"""Benchmark: editors' workloads, ours beside llama-server, interleaved in one run.

    python -m bench.editing --repeats 3 --record

The edit (a module given back with one name changed) with OpenAI's predicted outputs: ours
without drafts, with n-gram drafts, with the module as the prediction (what an editor
sends), and with the answer itself as the prediction (what a perfect prediction buys),
beside llama-server without drafts. Then keystrokes at a cursor through `/infill`, driven as
llama.vscode drives it (another file as a chunk, the typed text growing a character at a
time): ours beside llama-server with and without `--cache-reuse 256`. Last, a conversation's
next turn on a server just restarted, with the KV cache's disk tier and without (llama-server
keeps no cache across a restart).
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from app.settings.values import default_model_path
from bench import references, workloads
from bench.report import spread
from bench.run import add_output_options, progress, publish, rotate
from harness import llama_server
from harness.real_models import smollm2_fim_path
from harness.servers import Service

NO_DRAFTS, NGRAM, GIVEN, PERFECT, CPP = (
    "ours, no drafts", "ours, n-gram drafts", "ours, prediction: the module", "ours, prediction: the answer",
    "llama-server, no drafts",
)  # fmt: skip
WITH_DISK, WITHOUT_DISK = "ours, disk tier", "ours, no disk tier"
TYPED = "return math.pi * radius ** 2"
PREFIX, SUFFIX = (
    "import math\n\n\ndef area(radius):\n    ",
    "\n\n\ndef perimeter(radius):\n    return 2 * math.pi * radius\n",
)


def edit_body(index: int, args: argparse.Namespace, **fields: object) -> dict[str, object]:
    """The edit, answered whole (no ignore_eos: a prediction matches a natural answer)."""
    body = workloads.edit_request(index, args.edit_tokens, 0, **fields)
    return {**body, "ignore_eos": False}


def predictions(
    args: argparse.Namespace, ours: str, reference: str, index: Iterator[int]
) -> dict[str, list[float]]:
    """Decode tokens/s of the edit for each way of asking, one stream at a time, rounds interleaved."""
    runs: dict[str, list[float]] = {name: [] for name in (NO_DRAFTS, NGRAM, GIVEN, PERFECT, CPP)}
    for turn in range(args.repeats):
        number = next(index)  # one edit for every way in this round: the same answer to compare
        plain = _whole(ours, edit_body(number, args, speculative=False))
        module = workloads.CODE
        asks: dict[str, tuple[str, dict[str, object]]] = {
            NO_DRAFTS: (ours, {"speculative": False}), NGRAM: (ours, {}),
            GIVEN: (ours, {"prediction": {"type": "content", "content": module}}),
            PERFECT: (ours, {"prediction": {"type": "content", "content": plain}}), CPP: (reference, {}),
        }  # fmt: skip
        for name in rotate(list(asks), turn):
            url, fields = asks[name]
            stream = workloads.chat_stream(url, edit_body(number, args, **fields))
            runs[name].append(stream.tokens_per_second)
    return runs


def _whole(url: str, body: dict[str, object]) -> str:
    whole = {key: value for key, value in body.items() if key != "stream_options"} | {"stream": False}
    answer = httpx.post(url + "/v1/chat/completions", json=whole, timeout=600)
    answer.raise_for_status()
    return str(answer.json()["choices"][0]["message"]["content"])


def keystrokes(args: argparse.Namespace, servers: dict[str, str]) -> dict[str, dict[str, list[float]]]:
    """Per keystroke: wall time and prompt tokens evaluated, for each server; rounds interleaved."""
    runs: dict[str, dict[str, list[float]]] = {name: {"ms": [], "evaluated": []} for name in servers}
    chunk = [{"filename": "orders.py", "text": workloads.CODE}]
    for turn in range(args.repeats):
        for name in rotate(list(servers), turn):
            for typed in (TYPED[: n + 1] for n in range(args.typed)):
                body = {
                    "input_prefix": f"# round {turn}\n{PREFIX}", "input_suffix": SUFFIX, "input_extra": chunk,
                    "prompt": typed, "n_predict": 16, "top_k": 40, "top_p": 0.99, "stream": False,
                    "samplers": ["top_k", "top_p", "infill"], "cache_prompt": True, "t_max_prompt_ms": 500,
                    "t_max_predict_ms": 1000,
                }  # fmt: skip
                started = time.perf_counter()
                answer = httpx.post(servers[name] + "/infill", json=body, timeout=600)
                answer.raise_for_status()
                runs[name]["ms"].append((time.perf_counter() - started) * 1000)
                runs[name]["evaluated"].append(answer.json()["timings"]["prompt_n"])
    return runs


def history(turn: int, answer: str | None = None) -> list[dict[str, str]]:
    """A conversation about the module (its round's own, so no round resumes another's), and its
    next turn once the first `answer` is known."""
    ask = f"Conversation {turn}. Read this module and say in one sentence what it is for."
    turns = [{"role": "user", "content": f"{ask}\n\n```python\n{workloads.CODE}```\n\n{workloads.TEXTS[0]}"}]
    if answer is not None:
        turns += [
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "Which class holds the prices?"},
        ]
    return turns


def after_restart(args: argparse.Namespace, folder: Path) -> dict[str, list[float]]:
    """Time to first token (ms) of a conversation's next turn on a server restarted since its first
    turn, with the disk tier and without; rounds interleaved."""
    runs: dict[str, list[float]] = {WITH_DISK: [], WITHOUT_DISK: []}
    for turn in range(args.repeats):
        for name in rotate(list(runs), turn):
            disk = {"LLM_CACHE_DISK_MB": "256", "LLM_CACHE_DISK_PATH": str(folder / f"round-{turn}")}
            env = disk if name == WITH_DISK else {}
            first = references.ours(1, args.threads, args.n_ctx, LLM_MODEL_PATH=args.model, **env)
            try:
                answer = _whole(first.url, {"messages": history(turn), "max_tokens": 24, "temperature": 0})
            finally:
                first.stop()
            second = references.ours(1, args.threads, args.n_ctx, LLM_MODEL_PATH=args.model, **env)
            try:
                body = {"messages": history(turn, answer), "max_tokens": 8, "temperature": 0, "stream": True}
                runs[name].append(workloads.chat_stream(second.url, body).ttft * 1000)
            finally:
                second.stop()
    return runs


def report(
    args: argparse.Namespace,
    edits: dict[str, list[float]],
    keys: dict[str, dict[str, list[float]]],
    restarts: dict[str, list[float]],
) -> str:
    lines = [
        f"Model `{Path(args.model).name}` (and, for /infill, its copy with FIM tokens), {args.threads} "
        f"threads; medians of {args.repeats} interleaved rounds (range in brackets).",
        "",
        f"### The edit, up to {args.edit_tokens} tokens, one stream",
        "",
        "| how | decode tokens/s | vs ours without drafts |",
        "|---|---|---|",
    ]
    base = statistics.median(edits[NO_DRAFTS])
    for name, runs in edits.items():
        lines.append(f"| {name} | {spread(runs)} | {statistics.median(runs) / base:.2f}× |")
    lines += ["", f"### Keystrokes through /infill ({args.typed} a round)", ""]
    lines += ["| server | ms per keystroke | prompt tokens evaluated per keystroke |", "|---|---|---|"]
    for name, figures in keys.items():
        lines.append(f"| {name} | {spread(figures['ms'])} | {spread(figures['evaluated'], digits=0)} |")
    lines += [
        "",
        "### The next turn after a restart",
        "",
        "| server | time to first token, ms |",
        "|---|---|",
    ]
    lines += [f"| {name} | {spread(runs, digits=0)} |" for name, runs in restarts.items()]
    with_disk, without = statistics.median(restarts[WITH_DISK]), statistics.median(restarts[WITHOUT_DISK])
    given = statistics.median(edits[GIVEN]) / base
    perfect = statistics.median(edits[PERFECT]) / base
    ours_ms = statistics.median(keys["ours"]["ms"])
    theirs_ms = statistics.median(keys["llama-server, --cache-reuse 256"]["ms"])
    lines += [
        "", "### Targets", "", "| target | measured | verdict |", "|---|---|---|",
        f"| the edit with a prediction: at least 2× ours without | {given:.2f}× with the module, "
        f"{perfect:.2f}× with the answer itself | {'met' if given >= 2 else 'missed'} |",
        f"| the next turn after a restart: sooner with the disk tier | {with_disk:.0f} against "
        f"{without:.0f} ms | {'met' if with_disk < without else 'missed'} |",
        f"| keystrokes: at most llama-server's with --cache-reuse | {ours_ms:.0f} against {theirs_ms:.0f} ms "
        f"| {'met' if ours_ms <= theirs_ms else 'missed'} |",
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=default_model_path())
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--edit-tokens", type=int, default=300)
    parser.add_argument("--typed", type=int, default=len(TYPED), help="keystrokes a round")
    parser.add_argument("--repeats", type=int, default=3)
    add_output_options(parser)
    args = parser.parse_args(argv)
    index = itertools.count(1)
    fim = str(smollm2_fim_path())
    started: list[Service] = []
    try:
        ours = references.ours(1, args.threads, args.n_ctx, LLM_MODEL_PATH=args.model)
        started.append(ours)
        reference = llama_server.start(args.model, args.threads, 1, args.n_ctx, same_kernels=True)
        started.append(reference)
        progress("the edit, with and without predictions")
        edits = predictions(args, ours.url, reference.url, index)
        for service in started:
            service.stop()
        started.clear()
        # llama-server's batch as ours (LLM_N_BATCH's 512): /infill keeps other files' chunks by
        # what the context leaves beyond a batch, so the two prompts are the same.
        batch = ("-b", "512")
        infill_servers = {
            "ours": references.ours(1, args.threads, args.n_ctx, LLM_MODEL_PATH=fim),
            "llama-server, --cache-reuse 256": llama_server.start(
                fim, args.threads, 1, args.n_ctx, (*batch, "--cache-reuse", "256"), stock=True
            ),
            "llama-server": llama_server.start(fim, args.threads, 1, args.n_ctx, batch, stock=True),
        }
        started.extend(infill_servers.values())
        progress("keystrokes through /infill")
        keys = keystrokes(args, {name: service.url for name, service in infill_servers.items()})
        for service in started:
            service.stop()
        started.clear()
        progress("the next turn after a restart")
        with tempfile.TemporaryDirectory(prefix="bench-disk-") as folder:
            restarts = after_restart(args, Path(folder))
    finally:
        for service in started:
            service.stop()
    publish(report(args, edits, keys, restarts), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
