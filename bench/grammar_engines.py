"""Benchmark: JSON schemas under llguidance and under llama.cpp's GBNF: what each enforces, time per token.

    python -m bench.grammar_engines --repeats 5 --record

The question issue #37 asks before adopting llguidance (llama.cpp can be built with it,
`LLAMA_LLGUIDANCE`): does it cover JSON Schema (draft 2020-12) where our converter, llama.cpp's
own `json-schema-to-grammar.cpp`, refuses, and is it faster per token? Both engines run on the
default model's vocabulary (49,152 tokens, loaded without weights) in this process:

- coverage: each schema of a list of draft 2020-12 features, converted by ours (a GBNF grammar
  llama.cpp loads) and compiled by llguidance (its Python wheel, the same Rust library
  llama.cpp links), each taken or refused;
- time per token: for each schema both take, an instance of it is tokenized and walked token by
  token; at each position each engine computes the mask over the whole vocabulary (llama.cpp's
  grammar sampler applied to every token's candidate, as llama-server's sampler does when the
  first draw is refused; llguidance's bitmask), then accepts the token. Interleaved: the engines
  take turns, schema by schema, `--repeats` times; medians.

Adopt llguidance only if it wins on both (the issue's rule).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import llama_cpp
import llguidance
import llguidance.llamacpp

from app.engine.errors import GrammarError
from app.engine.sampling import grammar
from app.settings.values import default_model_path
from bench.run import add_output_options, publish
from harness.vocabulary import Vocabulary, default_vocabulary

# Draft 2020-12 features clients send, each a schema, an instance of it and a text that breaks only
# that feature (bench/grammar_cases.json). A grammar "enforces" a feature when it allows the
# instance and refuses the breaking text; a converter that drops a keyword it does not know
# allows both.
CASES: list[dict[str, Any]] = json.loads((Path(__file__).with_name("grammar_cases.json")).read_text())


def ours(schema: dict[str, Any], vocabulary: Vocabulary) -> str | None:
    """Our GBNF for `schema` if our converter takes it and llama.cpp loads it; else None."""
    try:
        gbnf = grammar.schema_grammar(schema)
    except GrammarError:
        return None
    sampler = llama_cpp.llama_sampler_init_grammar(vocabulary.vocab, gbnf.encode(), b"root")
    if not sampler:
        return None
    llama_cpp.llama_sampler_free(sampler)
    return gbnf


def theirs(schema: dict[str, Any], tokenizer: llguidance.LLTokenizer) -> str | None:
    """llguidance's grammar for `schema` if it compiles it; else None."""
    try:
        compiled = llguidance.LLMatcher.grammar_from_json_schema(schema)
    except ValueError:
        return None
    problem = llguidance.LLMatcher.validate_grammar(compiled, tokenizer)
    return None if problem and not problem.startswith("WARNING") else compiled


def gbnf_seconds(vocabulary: Vocabulary, gbnf: str, tokens: list[int], whole: bool) -> float | None:
    """Seconds per token for llama.cpp's grammar over the whole vocabulary (`whole`), or over the
    sampled token alone (what our sampler asks first); None if the walk fails."""
    size = llama_cpp.llama_vocab_n_tokens(vocabulary.vocab) if whole else 1
    data = (llama_cpp.llama_token_data * size)()
    sampler = llama_cpp.llama_sampler_init_grammar(vocabulary.vocab, gbnf.encode(), b"root")
    spent = 0.0
    try:
        for token in tokens:
            for n in range(size):
                data[n] = llama_cpp.llama_token_data(n if whole else token, 0.0, 0.0)
            array = llama_cpp.llama_token_data_array(data, size, -1, False)
            started = time.perf_counter()
            llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
            spent += time.perf_counter() - started
            if data[token if whole else 0].logit == float("-inf"):
                return None
            llama_cpp.llama_sampler_accept(sampler, token)
    finally:
        llama_cpp.llama_sampler_free(sampler)
    return spent / len(tokens)


def llguidance_seconds(tokenizer: llguidance.LLTokenizer, compiled: str, tokens: list[int]) -> float | None:
    """Seconds per token for llguidance's bitmask over the whole vocabulary; None if the walk fails."""
    matcher = llguidance.LLMatcher(tokenizer, compiled, log_level=0)
    spent = 0.0
    for token in tokens:
        started = time.perf_counter()
        mask = matcher.compute_bitmask()
        spent += time.perf_counter() - started
        if not mask[token // 8] >> (token % 8) & 1 or not matcher.consume_token(token):
            return None
    return spent / len(tokens)


def llguidance_accepts(tokenizer: llguidance.LLTokenizer, compiled: str, tokens: list[int]) -> bool:
    """Whether llguidance allows the tokens and then the end."""
    matcher = llguidance.LLMatcher(tokenizer, compiled, log_level=0)
    return matcher.consume_tokens(tokens) and matcher.is_accepting() and not matcher.is_error()


def verdict(grammar_text: str | None, allows: Any, good: str, bad: str) -> str:
    """How an engine treats a feature: refuses the schema, enforces it, ignores it, or is wrong."""
    if grammar_text is None:
        return "refuses the schema"
    if not allows(good):
        return "refuses a valid instance"
    return "ignores it" if allows(bad) else "enforces"


def report(args: argparse.Namespace) -> str:
    with default_vocabulary() as vocabulary:
        tokenizer = llguidance.llamacpp.lltokenizer_from_vocab(vocabulary.vocab)
        rows, timed = [], []
        for case in CASES:
            feature, schema = case["feature"], case["schema"]
            good, bad = json.dumps(case["instance"]), json.dumps(case["breaking"])
            gbnf, compiled = ours(schema, vocabulary), theirs(schema, tokenizer)
            mine = verdict(gbnf, lambda text, g=gbnf: vocabulary.accepts(g, text), good, bad)
            other = verdict(
                compiled,
                lambda text, c=compiled: llguidance_accepts(tokenizer, c, vocabulary.tokens(text)),
                good,
                bad,
            )
            rows.append((feature, mine, other))
            if gbnf is not None and compiled is not None and "valid" not in mine + other:
                timed.append((feature, gbnf, compiled, vocabulary.tokens(good)))
        times: dict[str, tuple[list[float], list[float], list[float]]] = {f: ([], [], []) for f, *_ in timed}
        for repeat in range(args.repeats):
            for feature, gbnf, compiled, tokens in timed:
                runs = [
                    (0, lambda g=gbnf, t=tokens: gbnf_seconds(vocabulary, g, t, whole=True)),
                    (1, lambda g=gbnf, t=tokens: gbnf_seconds(vocabulary, g, t, whole=False)),
                    (2, lambda c=compiled, t=tokens: llguidance_seconds(tokenizer, c, t)),
                ]
                for column, run in runs if repeat % 2 == 0 else runs[::-1]:  # turns, interleaved
                    took = run()
                    if took is not None:
                        times[feature][column].append(took * 1e6)
    return render(rows, times, args.repeats)


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.0f}" if values else "–"


def render(
    rows: list[tuple[str, str, str]],
    times: Mapping[str, tuple[list[float], list[float], list[float]]],
    repeats: int,
) -> str:
    lines = [
        "# llguidance against llama.cpp's GBNF for JSON schemas",
        "",
        f"`{Path(default_model_path()).name}`'s vocabulary (no weights); {llguidance.get_version()}.",
        "A feature is *enforced* when the grammar allows an instance and refuses a text that breaks",
        "only that feature; *ignored* when it allows both. Times: medians over "
        f"{repeats} interleaved walks of the instance, per token.",
        "",
        "| feature | ours (llama.cpp's converter) | llguidance | GBNF, whole vocabulary, µs | GBNF, "
        "the sampled token, µs | llguidance, whole vocabulary, µs |",
        "|---|---|---|---|---|---|",
    ]
    for feature, mine, other in rows:
        columns = times.get(feature, ([], [], []))
        lines.append(f"| {feature} | {mine} | {other} | " + " | ".join(_median(c) for c in columns) + " |")
    only_theirs = [f for f, a, b in rows if b == "enforces" and a != "enforces"]
    only_ours = [f for f, a, b in rows if a == "enforces" and b != "enforces"]
    pairs = [
        (statistics.median(whole), statistics.median(one), statistics.median(theirs))
        for whole, one, theirs in times.values()
        if whole and one and theirs
    ]
    beats_whole = sum(1 for whole, _, theirs in pairs if theirs < whole)
    beats_one = sum(1 for _, one, theirs in pairs if theirs < one)
    coverage = len(only_theirs) > len(only_ours)
    speed = bool(pairs) and beats_one == len(pairs)
    lines += [
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
        f"| llguidance enforces more features than ours | only it: {', '.join(only_theirs) or 'none'}; "
        f"only ours: {', '.join(only_ours) or 'none'} | {'met' if coverage else 'missed'} |",
        "| llguidance's mask faster than our per-token check on every schema both take | faster than "
        f"GBNF's whole-vocabulary mask on {beats_whole} of {len(pairs)}, than its check of the sampled "
        f"token on {beats_one} of {len(pairs)} | {'met' if speed else 'missed'} |",
        f"| adopt llguidance (both above) | | {'met' if coverage and speed else 'missed'} |",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    add_output_options(parser)
    args = parser.parse_args(argv)
    publish(report(args), args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
