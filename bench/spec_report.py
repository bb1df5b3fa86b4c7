"""The speculation benchmark's figures as markdown: the edit, the stories, the KV types, and the targets."""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from bench.report import spread

# The targets' names (the benchmark runs them, this module reports them).
OFF, ON = "ours, no drafts", "ours, n-gram drafts"
CPP_OFF = "llama-server, no drafts"
CPP_MODES = {  # llama-server's n-gram modes: its defaults, and ngram-simple keyed as ours
    "llama-server, ngram-simple": ("--spec-type", "ngram-simple"),
    "llama-server, ngram-simple n=4": ("--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "4"),
    "llama-server, ngram-mod": ("--spec-type", "ngram-mod"),
}


def markdown(
    args: argparse.Namespace, edited: dict[str, Any], told: dict[str, Any], kv: dict[str, Any]
) -> str:
    alone = {name: [s.tokens_per_second for s in runs] for name, runs in edited["alone"].items()}
    together = edited["together"]
    lines = [
        f"Model `{Path(args.model).name}`, {args.threads} threads, {args.slots} slots of "
        f"{args.n_ctx} tokens; medians of {args.repeats} interleaved rounds (range in brackets).",
        "",
        f"### The edit ({args.edit_tokens} tokens out, the answer mostly the prompt again"
        + (f"; the module's first {args.edit_lines} lines" if args.edit_lines else "")
        + ")",
        "",
        "| target | one stream, decode tokens/s | 4 at once, summed tokens/s | one stream vs ours without |",
        "|---|---|---|---|",
    ]
    base = statistics.median(alone[OFF])
    for name in alone:
        ratio = statistics.median(alone[name]) / base
        lines.append(f"| {name} | {spread(alone[name])} | {spread(together[name])} | {ratio:.2f}× |")
    lines += [
        "",
        f"### The story prompts ({args.max_tokens} tokens, nothing to copy): drafts on and off",
        "",
        "| clients | with drafts, tokens/s | without, tokens/s | with / without |",
        "|---|---|---|---|",
    ]
    for clients in (1, 8):
        on, off = told[ON][clients], told[OFF][clients]
        lines.append(
            f"| {clients} | {spread(on)} | {spread(off)} | "
            f"{100 * statistics.median(on) / statistics.median(off):.1f}% |"
        )
    memory, rate = kv["memory"], kv["throughput"]
    lines += [
        "",
        "### The KV cache in q8_0 beside f16",
        "",
        "| type | KV bytes per sequence (2048 cells) | aggregate tokens/s at 8 clients |",
        "|---|---|---|",
        *(f"| {name} | {memory[name]:,} | {spread(rate[name])} |" for name in ("f16", "q8_0")),
        "",
        f"The likeliest next token agrees at {100 * kv['agreement']:.1f}% of {kv['positions']} positions "
        "of fixed texts (prose, code, a list, dialogue), each scored by both.",
        "",
        "### Targets",
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
        *(f"| {what} | {measured} | {verdict} |" for what, measured, verdict in targets(alone, told, kv)),
    ]
    return "\n".join(lines) + "\n"


def verdict(ratio: float, share: float) -> str:
    return "met" if ratio >= share else f"missed by {100 * (share - ratio):.1f} points"


def targets(
    alone: dict[str, list[float]], told: dict[str, Any], kv: dict[str, Any]
) -> list[tuple[str, str, str]]:
    """Issue 21's targets for drafts and the KV types, each with what was measured."""
    median = {name: statistics.median(values) for name, values in alone.items()}
    best = max(CPP_MODES, key=lambda name: median[name])
    rows = []
    ratio = median[ON] / median[OFF]
    rows.append(
        (
            "the edit, one stream: drafts at least 1.8× ours without",
            f"{median[ON]:.1f} against {median[OFF]:.1f} tokens/s ({ratio:.2f}×)",
            verdict(ratio, 1.8),
        )
    )
    ratio = median[ON] / median[best]
    rows.append(
        (
            "the edit, one stream: at least 1.1× llama-server's best n-gram mode",
            f"{median[ON]:.1f} against {median[best]:.1f} tokens/s ({best}; {ratio:.2f}×)",
            verdict(ratio, 1.1),
        )
    )
    for clients in (1, 8):
        on, off = statistics.median(told[ON][clients]), statistics.median(told[OFF][clients])
        rows.append(
            (
                f"the story prompts at {clients} client(s): drafts cost at most 3%",
                f"{on:.1f} against {off:.1f} tokens/s ({100 * on / off:.1f}%)",
                verdict(on / off, 0.97),
            )
        )
    share = kv["memory"]["q8_0"] / kv["memory"]["f16"]
    rows.append(
        (
            "q8_0: at most 55% of f16's KV memory",
            f"{100 * share:.1f}%",
            "met" if share <= 0.55 else f"missed by {100 * (share - 0.55):.1f} points",
        )
    )
    q8, f16 = (statistics.median(kv["throughput"][name]) for name in ("q8_0", "f16"))
    rows.append(
        (
            "q8_0: at least 0.97× f16's throughput at 8 clients",
            f"{q8:.1f} against {f16:.1f} tokens/s ({q8 / f16:.2f}×)",
            verdict(q8 / f16, 0.97),
        )
    )
    rows.append(
        (
            "q8_0: top-1 agreement with f16 at least 0.95",
            f"{kv['agreement']:.3f}",
            verdict(kv["agreement"], 0.95),
        )
    )
    rows.append(
        (
            "(for reference) llama-server's n-gram modes against it without drafts",
            ", ".join(f"{name.split(', ')[1]} {median[name] / median[CPP_OFF]:.2f}×" for name in CPP_MODES),
            "—",
        )
    )
    return rows  # fmt: skip
