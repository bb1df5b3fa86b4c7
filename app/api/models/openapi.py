"""The models family in the OpenAPI document: llama-server's /models/load and /models/unload."""

from __future__ import annotations

from apispec import APISpec

from app.api.common.openapi import error_responses, json_answer, post
from app.api.models.schemas import ModelOrderSchema
from app.settings.models import ModelSpec

SUCCESS = {"type": "object", "required": ["success"], "properties": {"success": {"const": True}}}


def describe(spec: APISpec, models: tuple[ModelSpec, ...]) -> None:
    """Both routes take `{"model": id}` and answer `{"success": true}`."""
    spec.components.schema("ModelOrder", schema=ModelOrderSchema)
    spec.components.schema("ModelOrderDone", component=SUCCESS)
    spec.path(
        path="/models/load",
        operations=post(
            'Load an on-demand model ("load": "on_demand"); answers once a worker holds it ready',
            "ModelOrder",
            json_answer("A worker holds the model, ready.", "ModelOrderDone"),
            error_responses(400, 401, 404, 406, 409, 503),
        ),
    )
    spec.path(
        path="/models/unload",
        operations=post(
            "Unload an on-demand model from every worker holding it",
            "ModelOrder",
            json_answer("No worker holds the model any more.", "ModelOrderDone"),
            error_responses(400, 401, 404, 406, 409),
        ),
    )
