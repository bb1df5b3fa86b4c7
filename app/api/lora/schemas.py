"""The marshmallow schemas of vLLM's adapter-loading bodies."""

from __future__ import annotations

from marshmallow import fields, validate

from app.api.http.schemas import BaseSchema

_NAME = validate.Length(min=1, max=256)


class LoadAdapterSchema(BaseSchema):
    """vLLM's LoadLoRAAdapterRequest, and `model`: the base model (default: the first generating one)."""

    lora_name = fields.String(required=True, validate=_NAME)
    lora_path = fields.String(required=True, validate=validate.Length(min=1, max=4096))
    load_inplace = fields.Boolean(load_default=False)  # replace an adapter of that name
    model = fields.String(validate=_NAME)


class UnloadAdapterSchema(BaseSchema):
    """vLLM's UnloadLoRAAdapterRequest, by name (its `lora_int_id`, vLLM's own counter, means nothing
    here)."""

    lora_name = fields.String(required=True, validate=_NAME)


load_adapter_schema = LoadAdapterSchema()
unload_adapter_schema = UnloadAdapterSchema()
