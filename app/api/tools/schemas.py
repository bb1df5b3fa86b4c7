"""The body of POST /tools, as llama-server's web UI sends it."""

from __future__ import annotations

from marshmallow import fields

from app.api.http.schemas import BaseSchema


class ToolCallSchema(BaseSchema):
    """`{"tool": "<server>_<tool>", "params": {...}}`; `stream` is refused (MCP tools answer whole)."""

    tool = fields.String(required=True)
    params = fields.Dict(keys=fields.String(), load_default=dict)
    stream = fields.Boolean(load_default=False)


tool_call_schema = ToolCallSchema()
