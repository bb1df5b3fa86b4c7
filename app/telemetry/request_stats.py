"""What one request's generation did (tokens, timings, outcome), filled in as its chunks flow."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class RequestStats:
    """What a generation did for this request, filled in as its chunks flow."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens served from the KV cache (the most of any choice)
    ttft: float | None = None
    cancelled: bool = False
    rejected: bool = False
    relayed: bool = False  # handed to another worker, which logs and counts it
    key_name: str | None = None  # the API key's name, when the server has keys
    queue_wait: float | None = None  # seconds from admission to a first sequence
    finish_reason: str | None = None  # the last choice's to finish
    dropped_messages: int = 0  # oldest messages dropped for the conversation to fit the context
    started: float = field(default_factory=time.monotonic)
    submitted_at: float | None = None  # when its generation was submitted (monotonic), if it was
    sequence_at: float | None = None  # when a first choice got a sequence
    gaps: list[float] = field(default_factory=list)
    _last: float | None = None
    _tokens_by_choice: dict[int, int] = field(default_factory=dict)

    def count_tokens(self, choice: int, tokens: int) -> None:
        """The tokens a choice has generated so far (chunks carry running counts)."""
        self._tokens_by_choice[choice] = max(tokens, self._tokens_by_choice.get(choice, 0))
        self.completion_tokens = sum(self._tokens_by_choice.values())

    @property
    def longest_choice(self) -> int:
        """The most tokens one choice generated."""
        return max(self._tokens_by_choice.values(), default=0)

    def on_text(self) -> None:
        """A piece of text was produced now: time to first token, then gaps between tokens."""
        now = time.monotonic()
        if self._last is None:
            self.ttft = now - self.started
        else:
            self.gaps.append(now - self._last)
        self._last = now

    @property
    def last_text_at(self) -> float | None:
        """When the last piece of text was produced (monotonic), if any was."""
        return self._last

    @property
    def time_per_output_token(self) -> float | None:
        """Seconds per generated token after the first (None with fewer than two tokens)."""
        if self.ttft is None or self._last is None or self.completion_tokens < 2:
            return None
        return (self._last - self.started - self.ttft) / (self.completion_tokens - 1)
