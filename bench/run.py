"""Benchmark: ours beside llama.cpp's C++ server, raw llama-cpp-python and llama-cpp-python's server.

    python -m bench.run --repeats 3 --record \
        --chart bench/results/concurrency.png

Every server runs on loopback with the same model, context per sequence, threads and
slots, for the whole run; the repeats interleave the targets so that the shared
machine's drift weighs on all alike. Every request has a prompt of its own (no shared
prefix, so no server answers from its cache) and generates exactly max_tokens.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

from app.settings.values import default_model_path
from bench import arrivals, measure, provenance, references, report, sessions
from bench.report import CPP, NGINX, OURS, PEER, RAW, REPRO
from harness import llama_server, recorded_runs
from harness.servers import Service, nginx


def progress(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def publish(text: str, args: argparse.Namespace) -> None:
    """Print a benchmark's report, opened by when, on which commit and on which machine it ran;
    write it to the --markdown file when one is named, and with --record append the run as data
    to `bench/results/<program>.jsonl`, from which the docs render the benchmark's page."""
    shown = f"{provenance.line()}\n\n{text}"
    sys.stdout.write(shown)
    if args.markdown:
        args.markdown.write_text(shown)
    if args.record:
        program = Path(sys.argv[0]).stem
        repeats = next((getattr(args, name) for name in ("repeats", "rounds") if hasattr(args, name)), None)
        facts = provenance.facts(program, repeats, dict(llama_server.BUILDS))
        kept = recorded_runs.append(recorded_runs.record(program, text, facts))
        print(f"bench: recorded in {kept}", file=sys.stderr)


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """--markdown and --record, as every benchmark program takes them."""
    parser.add_argument("--markdown", type=Path, help="also write the report to this file")
    parser.add_argument(
        "--record", action="store_true",
        help="append the run to bench/results/<program>.jsonl ($LLM_BENCH_RESULTS), the docs' source",
    )  # fmt: skip


T = TypeVar("T")


def rotate(names: list[T], turn: int) -> list[T]:
    """The targets in a different order each repeat, so none always runs first."""
    turn %= len(names)
    return names[turn:] + names[:turn]


def start_servers(args: argparse.Namespace) -> dict[str, Service]:
    """Ours (one worker of `slots` sequences), nginx in front of it, llama-server, and the peer."""
    started: dict[str, Service] = {}
    try:
        started[OURS] = references.ours(
            1, args.threads, args.n_ctx, LLM_PARALLEL=str(args.slots), LLM_MODEL_PATH=args.model
        )
        if args.reproducible:  # what the batch-invariant kernels cost, measured beside the rest
            started[REPRO] = references.ours(
                1, args.threads, args.n_ctx, LLM_PARALLEL=str(args.slots), LLM_MODEL_PATH=args.model,
                LLM_BATCH_INVARIANT="1",
            )  # fmt: skip
        if not args.skip_nginx:
            started[NGINX] = nginx([started[OURS].port])
        stock = args.llama_server == "stock"
        started[CPP] = llama_server.start(args.model, args.threads, args.slots, args.n_ctx, stock=stock)
        if not args.skip_peer:
            started[PEER] = references.peer(args.model, args.threads, args.n_ctx)
    except BaseException:
        stop(started)
        raise
    return started


def stop(started: dict[str, Service]) -> None:
    for service in reversed(list(started.values())):
        service.stop()


def single_streams(args: argparse.Namespace, urls: dict[str, str], index: Iterator[int]) -> dict[str, list]:
    """Time to first token and decode speed of one stream at a time, for every target."""
    results: dict[str, list[measure.Stream]] = {RAW: [], **{name: [] for name in urls}}
    for turn in range(args.repeats):
        for name in rotate(list(results), turn):
            if name == RAW:
                results[RAW].append(
                    measure.raw(args.model, args.threads, args.n_ctx, args.max_tokens, next(index))
                )
            else:
                results[name].append(measure.single(urls[name], args.max_tokens, next(index)))
    return results


def sweeps(args: argparse.Namespace, urls: dict[str, str], index: Iterator[int]) -> dict[str, list]:
    """Aggregate throughput and TTFT at each number of concurrent clients, repeats interleaved."""
    runs: dict[str, dict[int, list[measure.Sweep]]] = {name: {c: [] for c in args.clients} for name in urls}
    for turn in range(args.repeats):
        for clients in args.clients:
            for name in rotate(list(urls), turn):
                first = next(index) * 1000  # room for every stream of the sweep
                runs[name][clients].append(
                    measure.sweep(urls[name], clients, args.per_client, args.max_tokens, first)
                )
    return {name: [measure.median_sweep(runs[name][c]) for c in args.clients] for name in urls}


def contention(args: argparse.Namespace, urls: dict[str, str], index: Iterator[int]) -> dict[str, dict]:
    """One stream's decode speed, quiet and beside one busy process, for ours and llama-server."""
    results: dict[str, dict[str, list[measure.Stream]]] = {n: {"quiet": [], "busy": []} for n in urls}
    for turn in range(args.repeats):
        for name in rotate(list(urls), turn):
            measure.warm_back_up(urls[name], args.threads)
            results[name]["quiet"].append(measure.single(urls[name], args.contention_tokens, next(index)))
        with references.busy_neighbour():
            for name in rotate(list(urls), turn):
                results[name]["busy"].append(
                    measure.single(urls[name], args.contention_tokens, next(index), time_limit=30)
                )
    return results


def long_arrivals(args: argparse.Namespace, urls: dict[str, str], index: Iterator[int]) -> dict[str, list]:
    """Long prompts arriving while streams run (bench/arrivals.py), for ours and llama-server."""
    runs: dict[str, list[arrivals.Arrivals]] = {name: [] for name in urls}
    for turn in range(args.repeats):
        for name in rotate(list(urls), turn):
            first = next(index) * 1000
            runs[name].append(
                arrivals.measure(urls[name], args.running, args.arrivals, args.arrival_tokens, first)
            )
    return runs


ANSWER_TOKENS = 24  # an agent's turn: a short reply or a tool call


def agent_sessions(args: argparse.Namespace, urls: dict[str, str], index: Iterator[int]) -> dict[str, dict]:
    """Agent-shaped sessions at each count of --sessions (bench/sessions.py), for ours and llama-server."""
    runs: dict[str, dict[int, list[sessions.Sessions]]] = {n: {k: [] for k in args.sessions} for n in urls}
    for turn in range(args.repeats):
        for count in args.sessions:
            for name in rotate(list(urls), turn):
                run = sessions.measure(
                    urls[name], count, args.session_turns, args.prefix_tokens, ANSWER_TOKENS, next(index)
                )
                runs[name][count].append(run)
    return runs


def memory(args: argparse.Namespace, index: Iterator[int]) -> dict[int, tuple[list[int], int, int]]:
    """Per-worker RSS and total PSS of ours (default settings) with 1 and 2 workers, loaded and warm."""
    figures = {}
    for workers in (1, 2):
        service = references.ours(
            workers, max(1, args.threads // workers), args.n_ctx, LLM_MODEL_PATH=args.model
        )
        try:
            for _ in range(2 * workers):
                measure.single(service.url, 4, next(index))
            figures[workers] = measure.memory_kib(service.pids()[1:])
        finally:
            service.stop()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=default_model_path())
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--slots", type=int, default=8, help="our LLM_PARALLEL and llama-server's --parallel")
    parser.add_argument("--n-ctx", type=int, default=2048, help="context per sequence")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--contention-tokens", type=int, default=192)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--clients", type=lambda v: [int(c) for c in v.split(",")], default=[1, 2, 4, 8])
    parser.add_argument("--per-client", type=int, default=2)
    parser.add_argument("--skip-peer", action="store_true")
    parser.add_argument("--skip-nginx", action="store_true")
    parser.add_argument("--skip-contention", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--running", type=int, default=4, help="streams running when long prompts arrive")
    parser.add_argument("--arrivals", type=int, default=3, help="long prompts arriving (0: skip)")
    parser.add_argument("--arrival-tokens", type=int, default=1500, help="each long prompt's length")
    parser.add_argument(
        "--sessions", type=lambda v: [int(c) for c in v.split(",") if c], default=[2, 4],
        help="agent-shaped sessions at once, each count a part of the run (empty: skip)",
    )  # fmt: skip
    parser.add_argument("--session-turns", type=int, default=4, help="turns of each agent-shaped session")
    parser.add_argument("--prefix-tokens", type=int, default=1200, help="the sessions' shared prefix")
    parser.add_argument(
        "--reproducible",
        action="store_true",
        help="also ours with LLM_BATCH_INVARIANT=1 (the reproducible mode's batch-invariant kernels)",
    )
    parser.add_argument(
        "--llama-server", choices=("stock", "same-kernels"), default="stock",
        help="stock: built as users build it (for speed); same-kernels: as our wheel (built for the tests)",
    )  # fmt: skip
    add_output_options(parser)
    parser.add_argument("--chart", type=Path)
    args = parser.parse_args(argv)
    index = itertools.count(1)
    started = start_servers(args)
    try:
        urls = {name: service.url for name, service in started.items()}
        for url in urls.values():
            measure.single(url, 4, next(index))  # warm-up
        progress("one stream at a time")
        singles = single_streams(args, urls, index)
        progress("concurrent clients")
        swept = sweeps(args, {n: u for n, u in urls.items() if n != NGINX}, index)
        progress("beside a busy process")
        busy = None if args.skip_contention else contention(args, {n: urls[n] for n in (OURS, CPP)}, index)
        progress("long prompts arriving while streams run")
        both = {n: urls[n] for n in (OURS, REPRO, CPP) if n in urls}
        arrived = long_arrivals(args, both, index) if args.arrivals else None
        progress("agent-shaped sessions")
        agents = agent_sessions(args, both, index) if args.sessions else None
    finally:
        stop(started)
    progress("memory")
    mem = None if args.skip_memory else memory(args, index)
    text = report.markdown(args, singles, swept, busy, mem, arrived, agents)
    publish(text, args)
    if args.chart:
        report.chart(args.chart, swept)
    return 0


if __name__ == "__main__":
    sys.exit(main())
