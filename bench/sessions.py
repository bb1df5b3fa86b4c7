"""A benchmark workload shaped like coding agents: sessions sharing a long prefix, short new turns.

Each run has a system prompt of its own, about `prefix_tokens` long (an agent's instructions and
tools), shared by every session of the run; `sessions` chat sessions start at once, each with a
short task of its own, and go on turn after turn: the answer (exactly `answer_tokens`, greedy)
and a short new user message (a tool's result, about 40 tokens) appended each time, as an agent
sends its whole conversation again. Measured per server: the first turn's time to first token
(the prefix evaluated, or shared with another session), the later turns' (only the new part
should be evaluated: the rest is the server's cache), and a session's wall time.
"""

from __future__ import annotations

import http.client
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from bench.measure import percentile
from bench.workloads import ChatTally, chat_stream

INSTRUCTIONS = (
    "You are a careful coding agent working in a repository. Read files before you change them, "
    "keep every change small, run the tests after each edit and report what you changed. "
)
RESULT = "The tool printed: tests passed {n}, failed {f}; the file has {lines} lines and {defs} functions. "


@dataclass
class Sessions:
    """One run: each session's turns' times to first token (seconds, in turn order) and wall times."""

    ttfts: list[list[float]]
    walls: list[float]
    failed: list[str]

    @property
    def first(self) -> list[float]:
        return [turns[0] for turns in self.ttfts if turns]

    @property
    def later(self) -> list[float]:
        return [ttft for turns in self.ttfts for ttft in turns[1:]]


class TextTally(ChatTally):
    """A ChatTally that keeps the answer's text, which the next turn sends back."""

    def __init__(self) -> None:
        super().__init__()
        self.text = ""

    def feed(self, line: str | bytes) -> None:
        super().feed(line)
        raw = line.decode() if isinstance(line, bytes) else line
        if raw.startswith("data: {"):
            for choice in json.loads(raw[6:]).get("choices", []):
                self.text += self.text_of(choice) or ""


def system_prompt(run: int, tokens: int) -> str:
    """Run `run`'s shared prefix, about `tokens` tokens (the instructions are about 40)."""
    return f"Session group {run}. " + INSTRUCTIONS * max(1, tokens // 40)


def measure(
    url: str, sessions: int, turns: int, prefix_tokens: int, answer_tokens: int, run: int
) -> Sessions:
    """`sessions` sessions of `turns` turns each at once on `url`, sharing run `run`'s prefix."""
    prefix = system_prompt(run, prefix_tokens)
    with ThreadPoolExecutor(sessions) as pool:
        done = list(pool.map(lambda k: _session(url, prefix, k, turns, answer_tokens), range(sessions)))
    return Sessions([d[0] for d in done], [d[1] for d in done], [d[2] for d in done if d[2]])


def _session(
    url: str, prefix: str, index: int, turns: int, answer_tokens: int
) -> tuple[list[float], float, str]:
    """One session's turns, one after another: their times to first token, its wall time, what broke."""
    messages = [
        {"role": "system", "content": prefix},
        {"role": "user", "content": f"Task {index}: fix the failing test in module_{index}.py."},
    ]
    ttfts: list[float] = []
    started = time.perf_counter()
    for turn in range(turns):
        body = {"messages": messages, "max_tokens": answer_tokens, "temperature": 0, "ignore_eos": True,
                "stream": True, "stream_options": {"include_usage": True}}  # fmt: skip
        try:
            ttft, text = _turn(url, body)
        except (OSError, http.client.HTTPException, AssertionError) as exc:  # counted and said, not the end
            return ttfts, time.perf_counter() - started, f"session {index}, turn {turn}: {exc}"[:120]
        ttfts.append(ttft)
        result = RESULT.format(n=10 + turn, f=turn % 2, lines=120 + 7 * index, defs=6 + turn)
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": result * 2}]
    return ttfts, time.perf_counter() - started, ""


def _turn(url: str, body: dict[str, object]) -> tuple[float, str]:
    """One streamed chat turn: seconds to its first text, and its text."""
    tally = TextTally()
    return chat_stream(url, body, tally).ttft, tally.text


def medians(runs: list[Sessions]) -> tuple[float, float, float, float]:
    """Medians over runs: the first turns' TTFT p50, the later turns' p50 and p90, a session's wall time."""
    return (
        statistics.median(percentile(r.first, 0.5) for r in runs),
        statistics.median(percentile(r.later, 0.5) for r in runs),
        statistics.median(percentile(r.later, 0.9) for r in runs),
        statistics.median(statistics.median(r.walls) for r in runs),
    )
