"""The model_admin family in the OpenAPI document: llama-server's /models/load and /unload, /lora-adapters."""

from __future__ import annotations

from app.api.http.openapi import Component, json_doc, operation
from app.api.model_admin.schemas import ModelOrderSchema

SUCCESS = {"type": "object", "required": ["success"], "properties": {"success": {"const": True}}}
ADAPTERS = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["id", "name", "path", "scale"],
        "properties": {
            "id": {"type": "integer", "minimum": 0, "description": "Its index: what requests' `lora` names"},
            "name": {"type": "string", "description": "Its id in LLM_MODELS' `loras`"},
            "path": {"type": "string"},
            "scale": {"type": "number", "description": "Its global scale (requests without `lora`)"},
        },
    },
}
_SCALES = {"type": "array", "items": {"$ref": "#/components/schemas/Lora"}}
_MODEL = {
    "name": "model",
    "in": "query",
    "required": False,
    "schema": {"type": "string"},
    "description": "The model (default: the first generating model)",
}


# "Lora" (the adapters' entries refer to it) is chat's `lora` field's, registered with chat's request.
COMPONENTS: dict[str, Component] = {
    "ModelOrder": ModelOrderSchema,
    "ModelOrderDone": SUCCESS,
    "LoraAdapters": ADAPTERS,
}


LOAD = operation(
    'Load an on-demand model ("load": "on_demand"); answers once a worker holds it ready',
    json_doc("A worker holds the model, ready.", "ModelOrderDone"),
    (400, 401, 404, 406, 409, 503),
    body="ModelOrder",
)
UNLOAD = operation(
    "Unload an on-demand model from every worker holding it",
    json_doc("No worker holds the model any more.", "ModelOrderDone"),
    (400, 401, 404, 406, 409),
    body="ModelOrder",
)
ADAPTER_SCALES = operation(
    "A model's LoRA adapters and their global scales (llama-server's)",
    json_doc("The adapters, in order.", "LoraAdapters"),
    (400, 401, 404, 503),
    parameters=[_MODEL],
)
SET_SCALES = operation(
    "Set a model's global LoRA scales on every worker holding it (those left out: 0)",
    json_doc("The scales apply.", "ModelOrderDone"),
    (400, 401, 404, 406, 503),
    body={"required": True, "content": {"application/json": {"schema": _SCALES}}},
    parameters=[_MODEL],
)
