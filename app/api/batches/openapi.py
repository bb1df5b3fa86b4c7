"""The Batch family in the OpenAPI document: the Batch object, its creation, list and cancel."""

from __future__ import annotations

from typing import Any

from app.api.batches.lines import ENDPOINTS
from app.api.batches.schemas import BatchCreateSchema
from app.api.http.openapi import Component, json_doc, list_schema, operation, query_param

_INT = {"type": "integer"}
_MAYBE_INT = {"anyOf": [_INT, {"type": "null"}]}
_MAYBE_STR = {"anyOf": [{"type": "string"}, {"type": "null"}]}
STATUSES = ("validating", "failed", "in_progress", "finalizing", "completed", "expired", "cancelling",
            "cancelled")  # fmt: skip
STAMPS = ("in_progress_at", "finalizing_at", "completed_at", "failed_at", "expired_at", "cancelling_at",
          "cancelled_at")  # fmt: skip
OBJECTS: dict[str, dict[str, Any]] = {
    "Batch": {
        "type": "object",
        "required": [
            "id",
            "object",
            "endpoint",
            "input_file_id",
            "completion_window",
            "status",
            "created_at",
            "request_counts",
        ],  # fmt: skip
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "batch"},
            "endpoint": {"enum": list(ENDPOINTS)},
            "errors": {"anyOf": [{"type": "object"}, {"type": "null"}]},
            "input_file_id": {"type": "string"},
            "completion_window": {"const": "24h"},
            "status": {"enum": list(STATUSES)},
            "output_file_id": _MAYBE_STR,
            "error_file_id": _MAYBE_STR,
            "created_at": _INT,
            "expires_at": _MAYBE_INT,
            **dict.fromkeys(STAMPS, _MAYBE_INT),
            "request_counts": {
                "type": "object",
                "required": ["total", "completed", "failed"],
                "properties": {"total": _INT, "completed": _INT, "failed": _INT},
            },
            "metadata": {"anyOf": [{"type": "object"}, {"type": "null"}]},
            "model": _MAYBE_STR,
            "usage": {"anyOf": [{"type": "object"}, {"type": "null"}]},
        },
    },
    "BatchList": list_schema("Batch"),
}


COMPONENTS: dict[str, Component] = {**OBJECTS, "BatchCreateRequest": BatchCreateSchema}


# /v1/batches: each batch a 404 for a key that did not create it.
_BATCH = json_doc("The batch.", "Batch")
CREATE = operation(
    "Run every line of an uploaded JSONL file (purpose batch) at low priority",
    _BATCH,
    (400, 401, 404, 503),
    body="BatchCreateRequest",
)
LIST = operation(
    "The key's batches, newest first",
    json_doc("A page.", "BatchList"),
    (400, 401, 503),
    parameters=[
        query_param("after", {"type": "string"}, "A batch id: the page starts after it."),
        query_param("limit", {"type": "integer", "minimum": 1, "maximum": 100}, "How many per page (20)."),
    ],
)
RETRIEVE = operation("A batch", _BATCH, (401, 404, 503))
CANCEL = operation("Cancel a batch (cancelling, then cancelled)", _BATCH, (400, 401, 404, 503))
