"""Profile: where one stream's tokens spend their CPU time, ours beside a stock llama-server.

    python -m bench.token_cost --streams 8 [--other /path/to/checkout]

Ours (one worker, `--slots` sequences) and a stock llama-server (harness/llama_server.py) each
answer `--streams` greedy streams of `--tokens` tokens, one at a time, the servers taking turns
stream by stream. Between the first and the last stream each thread's user and system CPU time
is read from /proc: per generated token, the hub (HTTP, SSE, the event loop), the native thread
(the engine's Python and the decode it calls) and llama.cpp's other threads; llama-server's
threads alike. Then, in a process of its own and no HTTP, the engine's step on one sequence: the
wall time of llama_decode against everything else the step does in Python. With `--other`, a
second checkout of ours is measured beside the first: an engine change against the code before it.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from app.settings.values import default_model_path
from bench import measure, references
from harness import llama_server
from harness.servers import Service

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")

# The engine's step alone, in the checkout's own code (argv: checkout, slots, tokens).
_STEP = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from app.engine.batcher import Batcher
from app.engine.batcher_settings import BatcherSettings
from app.engine.choice import Job
from app.engine.context import ContextShape
from app.engine.model import LoadedModel
from app.engine.types import ChoicePlan, Sampling
from app.settings.values import default_model_path
class Client:
    cancelled = False
slots, tokens = int(sys.argv[2]), int(sys.argv[3])
model = LoadedModel(default_model_path(), ContextShape(slots, 2048, slots * 2048, 512, 2))
batcher = Batcher(model, BatcherSettings(256, False, 0), lambda delivery, report: None)
spent = [0.0]
decode = model.decode
def timed(batch):
    began = time.perf_counter()
    code = decode(batch)
    spent[0] += time.perf_counter() - began
    return code
model.decode = timed
figures = []
for turn in range(3):
    prompt = model.tokenizer.text(f"Request {turn}: a long story about the number {turn}.")
    batcher._take(Job(Client(), ChoicePlan(prompt, tokens, Sampling(temperature=0), ignore_eos=True)), [])
    while any(s.choice is not None and s.choice.prefilling for s in batcher.sequences):
        batcher.step([])
    spent[0], steps, began = 0.0, 0, time.perf_counter()
    while batcher._busy():
        batcher.cycle(wait=False)
        steps += 1
    wall = time.perf_counter() - began
    figures.append((1000 * spent[0] / steps, 1000 * (wall - spent[0]) / steps))
print(json.dumps(figures))
"""


def thread_seconds(pid: int) -> dict[str, tuple[float, float]]:
    """Each thread of `pid`: (user, system) CPU seconds so far."""
    seconds = {}
    for task in glob.glob(f"/proc/{pid}/task/*"):
        try:
            fields = Path(task, "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        seconds[task.rsplit("/", 1)[1]] = (int(fields[11]) / TICK, int(fields[12]) / TICK)
    return seconds


def role(tid: str, pid: int, busiest: list[str]) -> str:
    """Ours' main thread is the hub and its busiest other the native thread calling llama_decode;
    llama-server's main thread is its decoding loop. Either's next is llama.cpp's second thread."""
    if tid == str(pid):
        return "1 main thread"
    return "2 busiest other thread" if tid == busiest[0] else "3 all other threads"


def profile(services: dict[str, tuple[Service, int]], streams: int, tokens: int) -> dict[str, dict]:
    """CPU milliseconds per generated token by thread role, user and system; decode speed."""
    before = {name: thread_seconds(pid) for name, (_, pid) in services.items()}
    counted = {name: 0 for name in services}
    speeds: dict[str, list[float]] = {name: [] for name in services}
    for index in range(streams):
        for name, (service, _) in services.items():
            stream = measure.single(service.url, tokens, 7000 + index)
            counted[name] += stream.tokens
            speeds[name].append(stream.tokens_per_second)
    figures: dict[str, dict] = {}
    for name, (_, pid) in services.items():
        after = thread_seconds(pid)
        spent = {tid: (u - before[name].get(tid, (0, 0))[0], s - before[name].get(tid, (0, 0))[1])
                 for tid, (u, s) in after.items()}  # fmt: skip
        busiest = sorted((t for t in spent if t != str(pid)), key=lambda t: -sum(spent[t]))
        rows: dict[str, list[float]] = {}
        for tid, (user, system) in spent.items():
            row = rows.setdefault(role(tid, pid, busiest), [0.0, 0.0])
            row[0] += 1000 * user / counted[name]
            row[1] += 1000 * system / counted[name]
        figures[name] = {"tokens/s": statistics.median(speeds[name]), "rows": rows}
    return figures


def engine_step(checkout: Path, slots: int, tokens: int) -> tuple[float, float]:
    """The engine alone, one sequence: ms per step in llama_decode, and in everything else (medians)."""
    command = [sys.executable, "-c", _STEP, str(checkout), str(slots), str(tokens)]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600)
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return statistics.median(f[0] for f in figures), statistics.median(f[1] for f in figures)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, default=8, help="our LLM_PARALLEL and llama-server's --parallel")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--other", type=Path, help="a second checkout of ours to measure beside this one")
    args = parser.parse_args(argv)
    checkouts = {"ours": ROOT, **({"ours (--other)": args.other.absolute()} if args.other else {})}
    model = default_model_path()
    started: dict[str, tuple[Service, int]] = {}
    try:
        for name, checkout in checkouts.items():
            server = references.ours(
                1, args.threads, 2048, root=checkout, LLM_PARALLEL=str(args.slots), LLM_MODEL_PATH=model
            )
            started[name] = (server, server.pids()[1])  # the worker
        cpp = llama_server.start(model, args.threads, args.slots, 2048, stock=True)
        started["llama-server (stock build)"] = (cpp, cpp.pids()[0])
        for service, _ in started.values():
            measure.single(service.url, 8, 1)  # warm
        figures = profile(started, args.streams, args.tokens)
    finally:
        for service, _ in reversed(list(started.values())):
            service.stop()
    shape = f"{args.streams} streams of {args.tokens} tokens"
    print(f"CPU ms per generated token, one stream at a time ({shape})\n")
    print("| server | tokens/s (median) | thread | user | system |")
    print("|---|---|---|---|---|")
    for name, figure in figures.items():
        for thread, (user, system) in sorted(figure["rows"].items()):
            print(f"| {name} | {figure['tokens/s']:.1f} | {thread[2:]} | {user:.3f} | {system:.3f} |")
    print("\nThe engine's step alone, one sequence, no HTTP (ms per step, medians of 3 runs)\n")
    print("| checkout | llama_decode | the rest of the step |")
    print("|---|---|---|")
    for name, checkout in checkouts.items():
        decode, rest = engine_step(checkout, args.slots, args.tokens)
        print(f"| {name} | {decode:.3f} | {rest:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
