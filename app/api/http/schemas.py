"""What request schemas share: unknown fields ignored (as OpenAI's and Anthropic's APIs do), LoRA scales."""

from __future__ import annotations

from marshmallow import EXCLUDE, Schema, validate

from app.api.http.fields import AdapterIdField, StrictFloat


class BaseSchema(Schema):
    """Ignore unknown fields: OpenAI clients send many a server may not know."""

    class Meta:
        unknown = EXCLUDE


class LoraSchema(BaseSchema):
    """One entry of llama-server's `lora` (and of POST /lora-adapters): an adapter and its scale."""

    id = AdapterIdField(required=True)
    scale = StrictFloat(required=True, validate=validate.Range(min=-100, max=100))
