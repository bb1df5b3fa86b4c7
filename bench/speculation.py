"""Benchmark: speculative decoding and KV cache types, ours beside llama-server, interleaved in one run.

    python -m bench.speculation --repeats 3 --record

An edit whose answer repeats its prompt (a module given back with one name changed),
one stream at a time and 4 at once: ours without drafts and with n-gram drafts (the
same server, `speculative` per request), llama-server without and with each of its
n-gram modes. The story prompts of `bench.run` with drafts on and off (what drafting
costs where nothing repeats). The KV cache in q8_0 beside f16: memory, throughput at
8 clients, and how often the likeliest next token agrees over fixed texts (both on the default
kernels, llama.cpp's fastest: a quantized V cache needs their flash attention).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx

from app.settings.values import default_model_path
from bench import measure, references, spec_report, workloads
from bench.run import add_output_options, progress, publish, rotate
from bench.spec_report import CPP_MODES, CPP_OFF, OFF, ON
from harness import llama_server
from harness.servers import Service


def start(args: argparse.Namespace) -> dict[str, Service]:
    started: dict[str, Service] = {}
    try:
        parallel = {"LLM_PARALLEL": str(args.slots)}
        started["ours"] = references.ours(1, args.threads, args.n_ctx, **parallel)
        quantized = {"LLM_CACHE_TYPE_K": "q8_0", "LLM_CACHE_TYPE_V": "q8_0"}
        started["ours q8_0"] = references.ours(1, args.threads, args.n_ctx, **quantized, **parallel)
        started[CPP_OFF] = llama_server.start(args.model, args.threads, args.slots, args.n_ctx, stock=True)
        for name, flags in CPP_MODES.items():
            started[name] = llama_server.start(
                args.model, args.threads, args.slots, args.n_ctx, flags, stock=True
            )
    except BaseException:
        for service in started.values():
            service.stop()
        raise
    return started


def edits(args: argparse.Namespace, servers: dict[str, Service], index: Iterator[int]) -> dict:
    """Decode speed of the edit, alone and with 4 at once, for every target; rounds interleaved."""
    targets: dict[str, Callable[[int], dict[str, object]]] = {
        OFF: lambda i: workloads.edit_request(i, args.edit_tokens, args.edit_lines, speculative=False),
        ON: lambda i: workloads.edit_request(i, args.edit_tokens, args.edit_lines),
        **{
            name: (lambda i: workloads.edit_request(i, args.edit_tokens, args.edit_lines))
            for name in (CPP_OFF, *CPP_MODES)
        },
    }
    url = {name: servers["ours" if name in (OFF, ON) else name].url for name in targets}
    alone: dict[str, list[measure.Stream]] = {name: [] for name in targets}
    together: dict[str, list[float]] = {name: [] for name in targets}
    for turn in range(args.repeats):
        for name in rotate(list(targets), turn):
            alone[name].append(workloads.chat_stream(url[name], targets[name](next(index))))
        for name in rotate(list(targets), turn):
            bodies = [(url[name], targets[name](next(index))) for _ in range(4)]
            with ThreadPoolExecutor(4) as pool:
                streams = list(pool.map(lambda job: workloads.chat_stream(*job), bodies))
            together[name].append(sum(s.tokens_per_second for s in streams))
    return {"alone": alone, "together": together}


def stories(args: argparse.Namespace, url: str, index: Iterator[int]) -> dict[str, dict[int, list[float]]]:
    """bench.run's story prompts, drafts on and off per request: aggregate tokens/s by clients."""
    runs: dict[str, dict[int, list[float]]] = {ON: {1: [], 8: []}, OFF: {1: [], 8: []}}
    for turn in range(args.repeats):
        for clients in (1, 8):
            for name in rotate([ON, OFF], turn):
                extra = {} if name == ON else {"speculative": False}
                bodies = [
                    {**measure.request_body(args.max_tokens, next(index)), **extra} for _ in range(clients)
                ]
                with ThreadPoolExecutor(clients) as pool:
                    streams = list(pool.map(lambda body: _completion(url, body), bodies))
                wall = max(s.ttft + s.decode_seconds for s in streams)
                runs[name][clients].append(sum(s.tokens for s in streams) / wall)
    return runs


def _completion(url: str, body: dict[str, object]) -> measure.Stream:
    tally = measure.Tally()
    with httpx.stream("POST", url + "/v1/completions", json=body, timeout=600) as response:
        for line in response.iter_lines():
            tally.feed(line)
    result = tally.result()
    assert result is not None, "no text came"
    return result


def kv_types(args: argparse.Namespace, servers: dict[str, Service], index: Iterator[int]) -> dict:
    """f16 against q8_0: KV bytes per sequence, aggregate tokens/s at 8 clients, top-1 agreement."""
    names = {"f16": servers["ours"].url, "q8_0": servers["ours q8_0"].url}
    memory = {}
    for name, url in names.items():
        (worker,) = httpx.get(url + "/health/workers", timeout=10).json()["data"]
        memory[name] = worker["kv_cache"]["bytes_per_sequence"]
    throughput: dict[str, list[float]] = {name: [] for name in names}
    for turn in range(args.repeats):
        for name in rotate(list(names), turn):
            first = next(index) * 1000
            point = measure.sweep(names[name], 8, 1, args.max_tokens, first)
            throughput[name].append(point.tokens_per_second)
    same = total = 0
    for text in workloads.TEXTS:
        reference, quantized = (workloads.top_tokens(url, text) for url in names.values())
        same += sum(1 for a, b in zip(reference, quantized, strict=True) if a == b)
        total += len(reference)
    return {"memory": memory, "throughput": throughput, "agreement": same / total, "positions": total}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=default_model_path())
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--n-ctx", type=int, default=2048, help="context per sequence")
    parser.add_argument("--edit-tokens", type=int, default=300)
    parser.add_argument("--edit-lines", type=int, default=0, help="the module's first lines (0: all)")
    parser.add_argument("--max-tokens", type=int, default=96, help="the story prompts' length")
    parser.add_argument("--repeats", type=int, default=3)
    add_output_options(parser)
    args = parser.parse_args(argv)
    index = itertools.count(1)
    servers = start(args)
    try:
        for service in servers.values():
            warm_up = workloads.edit_request(next(index), 4, args.edit_lines)
            workloads.chat_stream(service.url, warm_up)
        progress("the edit, alone and 4 at once")
        edited = edits(args, servers, index)
        progress("story prompts, drafts on and off")
        told = stories(args, servers["ours"].url, index)
        progress("KV cache types")
        kv = kv_types(args, servers, index)
    finally:
        for service in servers.values():
            service.stop()
    text = spec_report.markdown(args, edited, told, kv)
    publish(text, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
