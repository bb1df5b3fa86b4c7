"""The batcher alone on the real model, no HTTP: tokens/s of a batch of sequences, for one or two checkouts.

    python -m bench.batcher --sequences 8 --tokens 96 --rounds 3 --alternate 4 [--other /path/to/checkout]

Each measurement runs in a process of its own with the checkout's `app/` first on the
path: a batch of distinct prompts, every one generating exactly `--tokens` tokens, timed
from admission to the last token. With `--other`, the two checkouts alternate
`--alternate` times, so the machine's drift weighs on both alike (an engine change
measured against the code before it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Run inside the checkout's own interpreter path; imports that moved are found either way.
_MEASURE = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from app.engine.batcher import Batcher
from app.engine.batcher_settings import BatcherSettings
from app.engine.model import LoadedModel
from app.engine.sequence import Job
from app.engine.types import Sampling
try:
    from app.engine.types import ChoicePlan
except ImportError:  # a checkout from before the rename
    from app.engine.types import GenerationRequest as ChoicePlan
try:
    from app.engine.context import ContextShape
except ImportError:
    from app.engine.model import ContextShape
try:
    from app.settings.values import default_model_path
except ImportError:
    from app.setting_values import default_model_path

class Client:  # what the batcher reads of a generation
    cancelled = False

sequences, tokens, rounds = (int(v) for v in sys.argv[2:5])
model = LoadedModel(default_model_path(), ContextShape(sequences, 2048, sequences * 2048, 512, 2))
batcher = Batcher(model, BatcherSettings(256, False, 0), lambda delivery, report: None)
rates = []
for turn in range(rounds):
    delivery = []
    for i in range(sequences):
        prompt = model.tokenizer.text(f"Request {turn * sequences + i}: a long story about the number {i}.")
        plan = ChoicePlan(prompt, tokens, Sampling(temperature=0.8, seed=i), ignore_eos=True)
        batcher._take(Job(Client(), plan), delivery)
    started = time.perf_counter()
    while batcher._busy():
        batcher.step(delivery)
    rates.append(sequences * tokens / (time.perf_counter() - started))
print(json.dumps(rates))
"""


def measure(checkout: Path, sequences: int, tokens: int, rounds: int) -> list[float]:
    """tokens/s of `rounds` batches, in a fresh process running `checkout`'s engine."""
    command = [sys.executable, "-c", _MEASURE, str(checkout), str(sequences), str(tokens), str(rounds)]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600)
    return [float(rate) for rate in json.loads(done.stdout)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--rounds", type=int, default=3, help="batches per process")
    parser.add_argument("--alternate", type=int, default=4, help="processes per checkout, interleaved")
    parser.add_argument("--other", type=Path, help="a second checkout to measure beside this one")
    args = parser.parse_args(argv)
    checkouts = [ROOT, *([args.other.absolute()] if args.other else [])]
    rates: dict[Path, list[float]] = {checkout: [] for checkout in checkouts}
    for _ in range(args.alternate):
        for checkout in checkouts:
            rates[checkout] += measure(checkout, args.sequences, args.tokens, args.rounds)
    print(f"| checkout | tokens/s at {args.sequences} sequences, median (range) | runs |")
    print("|---|---|---|")
    for checkout, measured in rates.items():
        low, high = min(measured), max(measured)
        median = statistics.median(measured)
        print(f"| {checkout} | {median:.1f} ({low:.1f}–{high:.1f}) | {len(measured)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
