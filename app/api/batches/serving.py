"""A batch created over an uploaded JSONL file (the batch runner woken to split it), and a batch
cancelled: `cancelling` at once, `cancelled` once its running lines have stopped."""

from __future__ import annotations

from typing import Any

from flask import Response, current_app, jsonify

from app.api.batches.schemas import batch_create_schema
from app.api.http import store_access
from app.api.http.body import parse_json
from app.api.http.errors import InvalidRequestError
from app.store.batches import BatchStore


def batch_store() -> BatchStore:
    return store_access.needed("batches", "batch_id").batches


def found_batch(batch_id: str) -> tuple[BatchStore, dict[str, Any]]:
    """The store and the batch, if this request's key owns it; else a 404 as OpenAI's."""
    batches = batch_store()
    message = f"No batch found with id '{batch_id}'."
    return batches, store_access.found(batches.get, batch_id, message, "batch_id")


def created() -> Response:
    """A batch in `validating`: a worker splits its file into lines, then every worker runs them."""
    body = parse_json(batch_create_schema)
    store = store_access.needed("batches", "batch_id")
    file_id = body["input_file_id"]
    batch_file = store_access.found(
        store.files.get, file_id, f"No such File object: {file_id}", "input_file_id"
    )
    if batch_file["purpose"] != "batch":
        raise InvalidRequestError(
            f"The file {file_id} has purpose '{batch_file['purpose']}'; a batch runs a file uploaded "
            "with purpose 'batch'.",
            param="input_file_id",
        )
    expiry = body.get("output_expires_after")
    with store_access.reachable():
        batch = store.batches.create(
            store_access.owner(),
            body["endpoint"],
            file_id,
            body.get("metadata"),
            expiry["seconds"] if expiry else None,
        )
    runner = current_app.extensions.get("batch_runner")
    if runner is not None:
        runner.wake.set()  # this worker looks at once rather than at its next tick
    return jsonify(batch)


def cancelled(batch_id: str) -> Response:
    """`cancelling` at once; `cancelled` once the lines running now have stopped (within seconds)."""
    batches, batch = found_batch(batch_id)
    with store_access.reachable():
        while batch["status"] in ("validating", "in_progress"):
            if batches.change(batch_id, batch["status"], "cancelling"):
                break
            batch = batches.get(store_access.owner(), batch_id) or batch  # it moved on meanwhile: look again
        else:
            if batch["status"] not in ("cancelling", "cancelled"):
                raise InvalidRequestError(
                    f"The batch {batch_id} is {batch['status']}; only a validating or in-progress batch "
                    "can be cancelled.",
                    param="batch_id",
                    code="batch_not_cancellable",
                )
            return jsonify(batch)
        updated = batches.get(store_access.owner(), batch_id)
    return jsonify(updated)
