"""The marshmallow schema of llama-server's /models/load and /models/unload bodies: which model."""

from __future__ import annotations

from marshmallow import fields, validate

from app.api.http.schemas import BaseSchema, LoraSchema


class ModelOrderSchema(BaseSchema):
    """`{"model": id}`: an LLM_MODELS id or alias."""

    model = fields.String(required=True, validate=validate.Length(min=1, max=256))


model_order_schema = ModelOrderSchema()
lora_list_schema = LoraSchema(many=True)  # POST /lora-adapters: a JSON array
