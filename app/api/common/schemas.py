"""What every request schema shares: unknown fields are ignored, as OpenAI's and Anthropic's APIs do."""

from __future__ import annotations

from marshmallow import EXCLUDE, Schema


class BaseSchema(Schema):
    """Ignore unknown fields: OpenAI clients send many a server may not know."""

    class Meta:
        unknown = EXCLUDE
