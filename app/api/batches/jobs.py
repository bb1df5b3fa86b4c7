"""A batch's life apart from its lines: split its file into lines, then finalize it into its result files.

Both run on whichever worker finds the batch due (runner.py), under the batch's lease,
and both may be done again by another worker if this one dies half-way: lines are added
only once, and the result files have ids fixed by the batch's, rewritten whole.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from app.api.batches.lines import TooManyLinesError, error_line, read_lines
from app.store.batches import Due, result_file_ids
from app.store.opening import Store

log = logging.getLogger(__name__)

LEASE = 60.0  # seconds a worker holds a batch while splitting or finalizing it
EXPIRED = "This request was not run before the batch's completion window ended."


def tend(store: Store, worker: str, route: Callable[[Any, str], str]) -> None:
    """Move every batch that is due one step on: split, finish, cancel or expire it."""
    for due in store.batches.active():
        if due.status == "validating":
            if store.batches.lease(due.id, due.status, worker, LEASE):
                split(store, due.id, due.owner, route)
            continue
        pending, live = store.batch_lines.unfinished(due.id)
        if due.status == "in_progress" and time.time() > due.expires_at:
            store.batch_lines.close_unanswered(
                due.id, lambda custom_id, line_no: error_line(custom_id, "batch_expired", EXPIRED, line_no)
            )
            finalize(store, due, worker, "expired")
        elif due.status == "in_progress" and pending == 0 and live == 0:
            if store.batches.change(due.id, "in_progress", "finalizing"):
                finalize(store, replace(due, status="finalizing"), worker, "completed")
        elif due.status == "finalizing":  # its finalizer died: take over once its lease ran out
            finalize(store, due, worker, "completed")
        elif due.status == "cancelling" and live == 0:
            finalize(store, due, worker, "cancelled")


def split(store: Store, batch_id: str, owner: str, route: Callable[[Any, str], str]) -> None:
    """Read the batch's input file into lines (each checked), then let the workers run them."""
    endpoint, file_id = store.batches.endpoint_and_file(batch_id)
    if store.files.get(owner, file_id) is None:
        _fail(store, batch_id, "invalid_file", f"The input file {file_id} no longer exists.")
        return
    try:
        rows = list(read_lines(store.files.content(file_id), endpoint, route))
    except TooManyLinesError as exc:
        _fail(store, batch_id, "too_many_requests", str(exc))
        return
    if not rows:
        _fail(store, batch_id, "empty_file", f"The input file {file_id} has no requests.")
        return
    store.batch_lines.add(batch_id, rows)
    if store.batches.change(batch_id, "validating", "in_progress"):
        log.info("batch %s: %d requests to run", batch_id, len(rows))


def finalize(store: Store, due: Due, worker: str, to: str) -> None:
    """Write the output and error files from the done lines, then end the batch as `to`."""
    if not store.batches.lease(due.id, due.status, worker, LEASE):
        return  # another worker is at it
    counts = _counts(store, due.id)
    usage, model = _usage(store.batch_lines.results(due.id, failed=False))
    output_id, error_id = result_file_ids(due.id)
    ids = {
        "output_file_id": _write(store, due, output_id, counts["completed"], failed=False),
        "error_file_id": _write(store, due, error_id, counts["failed"], failed=True),
    }
    if store.batches.change(due.id, due.status, to, request_counts=counts, usage=usage, model=model, **ids):
        store.batch_lines.drop(due.id)
        log.info("batch %s %s: %d answered, %d failed", due.id, to, counts["completed"], counts["failed"])


def _write(store: Store, due: Due, file_id: str, lines: int, failed: bool) -> str | None:
    """One result file, rewritten whole (a finalizer that died may have left part of it); None if empty."""
    store.files.discard(file_id)
    if not lines:
        return None
    name = f"{due.id}_{'error' if failed else 'output'}.jsonl"
    results = _jsonl(store.batch_lines.results(due.id, failed))
    store.files.create(due.owner, file_id, name, "batch_output", results, due.output_ttl)
    return file_id


def _usage(results: Iterator[dict[str, Any]]) -> tuple[dict[str, Any], str | None]:
    """The Batch's `usage` (OpenAI's token counts, summed over the answered lines) and `model`."""
    tokens = {"input": 0, "output": 0, "cached": 0, "reasoning": 0}
    model = None
    for result in results:
        body = (result.get("response") or {}).get("body") or {}
        model = model or body.get("model")
        used = body.get("usage") or {}
        # Chat and text completions and embeddings say prompt/completion; Responses input/output.
        tokens["input"] += used.get("prompt_tokens", used.get("input_tokens", 0)) or 0
        tokens["output"] += used.get("completion_tokens", used.get("output_tokens", 0)) or 0
        details_in = used.get("prompt_tokens_details") or used.get("input_tokens_details") or {}
        details_out = used.get("completion_tokens_details") or used.get("output_tokens_details") or {}
        tokens["cached"] += details_in.get("cached_tokens") or 0
        tokens["reasoning"] += details_out.get("reasoning_tokens") or 0
    usage = {
        "input_tokens": tokens["input"],
        "input_tokens_details": {"cached_tokens": tokens["cached"]},
        "output_tokens": tokens["output"],
        "output_tokens_details": {"reasoning_tokens": tokens["reasoning"]},
        "total_tokens": tokens["input"] + tokens["output"],
    }
    return usage, model


def _counts(store: Store, batch_id: str) -> dict[str, int]:
    found = store.batches.get(None, batch_id)
    assert found is not None, "asked only of a batch this worker holds"
    return dict(found["request_counts"])


def _jsonl(results: Iterator[dict[str, Any]]) -> Iterator[bytes]:
    for result in results:
        yield json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _fail(store: Store, batch_id: str, code: str, message: str) -> None:
    errors = {"object": "list", "data": [{"code": code, "message": message, "param": None, "line": None}]}
    if store.batches.change(batch_id, "validating", "failed", errors=errors):
        log.info("batch %s failed: %s", batch_id, message)
