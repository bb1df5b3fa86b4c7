"""Helpers of the Batch API tests: a JSONL upload, a batch polled until it ends, its result lines."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import openai
from openai.types import Batch

ENDED = ("completed", "failed", "expired", "cancelled")


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def finished(
    client: openai.OpenAI,
    batch_id: str,
    until: Callable[[Batch], bool] = lambda batch: batch.status in ENDED,
    timeout: float = 300,
) -> Batch:
    """The batch once `until` holds (by default: it has ended), polled as a client polls it."""
    deadline = time.monotonic() + timeout
    while True:
        batch = client.batches.retrieve(batch_id)
        if until(batch):
            return batch
        assert time.monotonic() < deadline, f"batch {batch_id} still {batch.status} after {timeout}s: {batch}"
        time.sleep(0.2)


def results(client: openai.OpenAI, file_id: str | None) -> list[dict[str, Any]]:
    """A result file's lines, parsed (an empty list when the batch wrote none)."""
    if file_id is None:
        return []
    return [json.loads(line) for line in client.files.content(file_id).read().splitlines()]
