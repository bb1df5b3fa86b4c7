"""`/v1/batches`: create a batch over an uploaded JSONL file, read it, list them, cancel it."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify

from app.api.batches import openapi as doc
from app.api.batches.schemas import batch_create_schema, batch_list_query_schema
from app.api.http import store_access
from app.api.http.body import parse_json
from app.api.http.errors import InvalidRequestError
from app.api.http.openapi import documented
from app.store.batches import BatchStore

bp = Blueprint("batches", __name__)


def _batches() -> BatchStore:
    return store_access.needed("batches", "batch_id").batches


def _found(batch_id: str) -> tuple[BatchStore, dict[str, Any]]:
    batches = _batches()
    return batches, store_access.found(
        batches.get, batch_id, f"No batch found with id '{batch_id}'.", "batch_id"
    )


@bp.post("/v1/batches")
@documented(doc.CREATE)
def create_batch() -> Response:
    """A batch in `validating`: a worker splits its file into lines, then every worker runs them."""
    body = parse_json(batch_create_schema)
    store = store_access.needed("batches", "batch_id")
    file_id = body["input_file_id"]
    found = store_access.found(store.files.get, file_id, f"No such File object: {file_id}", "input_file_id")
    if found["purpose"] != "batch":
        raise InvalidRequestError(
            f"The file {file_id} has purpose '{found['purpose']}'; a batch runs a file uploaded "
            "with purpose 'batch'.",
            param="input_file_id",
        )
    expiry = body.get("output_expires_after")
    with store_access.reachable():
        created = store.batches.create(
            store_access.owner(),
            body["endpoint"],
            file_id,
            body.get("metadata"),
            expiry["seconds"] if expiry else None,
        )
    runner = current_app.extensions.get("batch_runner")
    if runner is not None:
        runner.wake.set()  # this worker looks at once rather than at its next tick
    return jsonify(created)


@bp.get("/v1/batches")
@documented(doc.LIST)
def list_batches() -> Response:
    query = store_access.query(batch_list_query_schema)
    after = query.get("after")
    listed = store_access.page(
        lambda owner: _batches().list(owner, after, query["limit"]), f"No batch with id '{after}'."
    )
    return jsonify(listed)


@bp.get("/v1/batches/<batch_id>")
@documented(doc.RETRIEVE)
def get_batch(batch_id: str) -> Response:
    return jsonify(_found(batch_id)[1])


@bp.post("/v1/batches/<batch_id>/cancel")
@documented(doc.CANCEL)
def cancel_batch(batch_id: str) -> Response:
    """`cancelling` at once; `cancelled` once the lines running now have stopped (within seconds)."""
    batches, found = _found(batch_id)
    with store_access.reachable():
        while found["status"] in ("validating", "in_progress"):
            if batches.change(batch_id, found["status"], "cancelling"):
                break
            found = batches.get(store_access.owner(), batch_id) or found  # it moved on meanwhile: look again
        else:
            if found["status"] not in ("cancelling", "cancelled"):
                raise InvalidRequestError(
                    f"The batch {batch_id} is {found['status']}; only a validating or in-progress batch "
                    "can be cancelled.",
                    param="batch_id",
                    code="batch_not_cancellable",
                )
            return jsonify(found)
        updated = batches.get(store_access.owner(), batch_id)
    return jsonify(updated)
