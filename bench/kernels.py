"""Benchmark: are llama.cpp's CPU answers batch-invariant, and what do invariant kernels cost?

    python -m bench.kernels --repeats 3 --record

Two builds of the pinned llama-cpp-python, made by deploy/llama-cpp/wheel.sh (cached per
machine): ours, with deploy/llama-cpp/patches applied, and the sdist as it is (stock). Each
runs llama.cpp directly (no server) in a child process, with llama.cpp's fastest kernels
(flash attention on, repacked and tiled weights) and with the batch-invariant ones
(LLM_BATCH_INVARIANT=1: none of those; llamafile's sgemm, which the patch sends one row of a
float matrix too). For each, on SmolLM2 and Gemma 3 270M:
- whether a token's logits are bit for bit the same when computed on 1 thread or 2, beside
  another sequence, with its prompt in chunks of 37 tokens instead of 200, with its prompt
  from a cache (one token left to evaluate), after an answer generated a token at a time (a
  conversation's next turn), and as a draft token verified with others (speculative decoding);
- prompt evaluation (512 tokens from nothing, and 256 more at a depth of 1,024) and
  generation (at a depth of 1,280) in tokens per second, 2 threads, repeats interleaved.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

from bench.run import add_output_options, progress, publish, rotate
from harness.files import machine_cache
from harness.real_models import gemma3_path
from harness.servers import ROOT

CACHE = machine_cache("kernel-builds")
CHECKS = ("threads", "neighbour", "chunks", "cached prefix", "next turn", "drafts")


def build(stock: bool) -> Path:
    """The extracted wheel of one build (ours, patched, or the sdist as it is), for PYTHONPATH."""
    script = ROOT / "deploy" / "llama-cpp" / "wheel.sh"
    folder = subprocess.run(
        ["bash", str(script), sys.executable],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "LLAMA_PATCHES": "0" if stock else "1"},
    ).stdout.strip()
    (wheel,) = Path(folder).glob("llama_cpp_python-*.whl")
    target = CACHE / Path(folder).name
    if not (target / "llama_cpp").exists():
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(target)
    return target


def measure(model_path: str, invariant: bool) -> dict[str, object]:
    """In the child process: the checks and the speeds of one build and one setting."""
    import llama_cpp
    import numpy as np
    from llama_cpp import _internals as internals
    from llama_cpp._logger import set_verbose

    from app.engine.batch import TokenBatch

    set_verbose(False)
    params = llama_cpp.llama_model_default_params()
    params.use_extra_bufts = not invariant
    model = internals.LlamaModel(path_model=model_path, params=params, verbose=False)
    n_vocab = model.n_vocab()

    def context(threads: int, sequences: int = 2) -> llama_cpp.llama_context_p:
        p = llama_cpp.llama_context_default_params()
        p.n_ctx, p.n_batch, p.n_ubatch, p.n_seq_max = 2048 * sequences, 256, 256, sequences
        p.n_threads = p.n_threads_batch = threads
        p.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED if invariant else -1
        p.no_perf = True
        return internals.LlamaContext(model=model, params=p, verbose=False).ctx

    batch = TokenBatch(256)
    rng = np.random.default_rng(1)
    prompt = [int(t) for t in rng.integers(300, 5000, 600)]

    def run(ctx: Any, items: list[tuple[int, list[int], int, bool]], every: bool = False) -> np.ndarray:
        batch.clear()
        for seq, tokens, position, last in items:
            batch.add_run(np.asarray(tokens, dtype=np.int32), position, seq, last, logits_all=every)
        assert batch.decode(ctx) == 0
        rows = [i for i in range(batch.size) if batch.logits[i]]
        return np.stack(
            [np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, i), shape=(n_vocab,)) for i in rows]
        )

    def greedy(threads: int = 2, chunk: int = 200, beside: bool = False, cached: bool = False,
               answer_first: bool = False, drafts: bool = False) -> np.ndarray:  # fmt: skip
        ctx = context(threads)
        tokens = prompt if not answer_first else prompt[:400]
        cut = len(tokens) - 1 if cached else len(tokens)
        pieces = [tokens[i : min(i + chunk, cut)] for i in range(0, cut, chunk)] + [tokens[cut:]]
        rows, position = np.empty(0), 0
        for step, piece in enumerate(p for p in pieces if p):
            neighbour = [(1, prompt[step * 8 : step * 8 + 8], step * 8, True)] if beside else []
            rows, position = run(ctx, [(0, piece, position, True), *neighbour]), position + len(piece)
        if answer_first:  # the rest of the prompt as a generated answer, a token at a time
            for token in prompt[400:]:
                rows, position = run(ctx, [(0, [token], position, True)]), position + 1
        out = [rows[0].copy()]
        if drafts:  # the next tokens as a draft of three, verified together
            following = [int(np.argmax(out[0]))] + [int(t) for t in rng.integers(300, 5000, 2)]
            out += list(run(ctx, [(0, following, position, True)], every=True)[:1])
        else:
            token = int(np.argmax(out[0]))
            out.append(run(ctx, [(0, [token], position, True)])[0].copy())
        return np.stack(out)

    reference = greedy()
    variants = {
        "threads": greedy(threads=1),
        "neighbour": greedy(beside=True),
        "chunks": greedy(chunk=37),
        "cached prefix": greedy(cached=True),
        "next turn": greedy(answer_first=True),
        "drafts": greedy(drafts=True),
    }
    same = {name: bool(np.array_equal(values, reference)) for name, values in variants.items()}
    ctx = context(2, sequences=1)
    run(ctx, [(0, prompt[:64], 0, True)])  # warm up
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
    tokens = [int(t) for t in rng.integers(300, 5000, 1400)]
    started = time.perf_counter()
    for start in range(0, 512, 256):
        run(ctx, [(0, tokens[start : start + 256], start, True)])
    short = 512 / (time.perf_counter() - started)
    for start in range(512, 1024, 256):
        run(ctx, [(0, tokens[start : start + 256], start, True)])
    started = time.perf_counter()
    run(ctx, [(0, tokens[1024:1280], 1024, True)])
    deep = 256 / (time.perf_counter() - started)
    started = time.perf_counter()
    for offset in range(32):
        run(ctx, [(0, [tokens[1280 + offset]], 1280 + offset, True)])
    decode = 32 / (time.perf_counter() - started)
    return {"same": same, "prefill_512": short, "prefill_deep": deep, "decode": decode}


def child(folder: Path, model: str, invariant: bool) -> dict[str, object]:
    env = {
        **os.environ,
        "PYTHONPATH": f"{folder}{os.pathsep}{ROOT}",
        "GGML_CPU_TILED_MM": "0" if invariant else "1",
    }
    code = (
        f"import json; from bench.kernels import measure; print(json.dumps(measure({model!r}, {invariant})))"
    )
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    add_output_options(parser)
    parser.add_argument("--ours-only", action="store_true", help="leave the stock build out")
    args = parser.parse_args(argv)
    from app.settings.values import default_model_path

    models = {"SmolLM2 135M (Q4_1)": default_model_path(), "Gemma 3 270M (Q4_K_M)": str(gemma3_path())}
    builds = {"ours (patched)": build(stock=False)}
    if not args.ours_only:
        builds["stock (the sdist as it is)"] = build(stock=True)
    targets = [(b, inv) for b in builds for inv in (True, False)]
    results: dict[tuple[str, str, bool], list[dict[str, object]]] = {}
    for repeat in range(args.repeats):
        for model_name, path in models.items():
            for index in rotate(list(range(len(targets))), repeat):
                name, invariant = targets[index]
                progress(f"round {repeat + 1}: {model_name}, {name}, invariant={invariant}")
                results.setdefault((model_name, name, invariant), []).append(
                    child(builds[name], path, invariant)
                )
    publish(report(args, results), args)
    return 0


def report(args: argparse.Namespace, results: dict[tuple[str, str, bool], list[dict[str, object]]]) -> str:
    lines = [
        f"llama.cpp directly, 2 threads, {args.repeats} repeats interleaved; speeds are medians (tokens/s). "
        "A check is ✓ when the token's logits are bit for bit the plain computation's in every repeat.",
        "",
        f"| model | build | kernels | {' | '.join(CHECKS)} | prompt, 512 | prompt at 1,024 | generation |",
        f"|---|---|---|{'---|' * len(CHECKS)}---|---|---|",
    ]
    for (model, build_name, invariant), runs in results.items():
        checks = [all(run["same"][c] for run in runs) for c in CHECKS]  # type: ignore[index]  # JSON rows
        speeds = [
            statistics.median(float(run[k]) for run in runs)  # type: ignore[arg-type]  # JSON rows
            for k in ("prefill_512", "prefill_deep", "decode")
        ]
        kernel = "batch-invariant" if invariant else "fastest"
        marks = " | ".join("✓" if ok else "✗" for ok in checks)
        figures = f"{speeds[0]:.0f} | {speeds[1]:.0f} | {speeds[2]:.1f}"
        lines.append(f"| {model} | {build_name} | {kernel} | {marks} | {figures} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
