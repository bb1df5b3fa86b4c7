"""Raw llama-cpp-python, in a process of its own: one warm-up, then one measured generation, as JSON."""

from __future__ import annotations

import argparse
import json
import time

from llama_cpp import Llama

from bench.measure import prompt


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("--threads", "--n-ctx", "--max-tokens", "--index"):
        parser.add_argument(name, type=int, required=True)
    parser.add_argument("--model", required=True)
    args = parser.parse_args()
    llama = Llama(
        model_path=args.model, n_ctx=args.n_ctx, n_threads=args.threads, seed=args.index, verbose=False
    )
    tokens = llama.tokenize(prompt(args.index).encode(), add_bos=False)
    for _ in range(2):  # the first run warms the caches, as the servers get a warm-up request
        llama.reset()
        started = time.perf_counter()
        first = last = started
        count = 0
        for _ in llama.generate(tokens, temp=0.0):
            last = time.perf_counter()
            if count == 0:
                first = last
            count += 1
            if count >= args.max_tokens:
                break
    print(json.dumps({"ttft": first - started, "tokens": count, "decode_seconds": last - first}))


if __name__ == "__main__":
    main()
