"""`/v1/batches`: create a batch over an uploaded JSONL file, read it, list them, cancel it."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.api.batches import openapi as doc
from app.api.batches import serving
from app.api.batches.schemas import batch_list_query_schema
from app.api.http import store_access
from app.api.http.openapi import documented

bp = Blueprint("batches", __name__)


@bp.post("/v1/batches")
@documented(doc.CREATE)
def create_batch() -> Response:
    """A batch in `validating`: a worker splits its file into lines, then every worker runs them."""
    return serving.created()


@bp.get("/v1/batches")
@documented(doc.LIST)
def list_batches() -> Response:
    query = store_access.query(batch_list_query_schema)
    after = query.get("after")
    listed = store_access.page(
        lambda owner: serving.batch_store().list(owner, after, query["limit"]), f"No batch with id '{after}'."
    )
    return jsonify(listed)


@bp.get("/v1/batches/<batch_id>")
@documented(doc.RETRIEVE)
def get_batch(batch_id: str) -> Response:
    return jsonify(serving.found_batch(batch_id)[1])


@bp.post("/v1/batches/<batch_id>/cancel")
@documented(doc.CANCEL)
def cancel_batch(batch_id: str) -> Response:
    """`cancelling` at once; `cancelled` once the lines running now have stopped (within seconds)."""
    return serving.cancelled(batch_id)
