"""Marshmallow schemas of the Batch API: a batch to create, and the list query."""

from __future__ import annotations

from marshmallow import fields, validate

from app.api.batches.lines import ENDPOINTS
from app.api.http.fields import metadata_field
from app.api.http.schemas import BaseSchema


class ExpiresAfterSchema(BaseSchema):
    anchor = fields.String(required=True, validate=validate.Equal("created_at"))
    seconds = fields.Integer(required=True, strict=True, validate=validate.Range(3600, 2592000))


class BatchCreateSchema(BaseSchema):
    """`POST /v1/batches`: run every line of an uploaded file (purpose `batch`) against one endpoint."""

    input_file_id = fields.String(required=True, validate=validate.Length(min=1, max=80))
    endpoint = fields.String(required=True, validate=validate.OneOf(ENDPOINTS))
    completion_window = fields.String(required=True, validate=validate.Equal("24h"))
    metadata = metadata_field()
    output_expires_after = fields.Nested(ExpiresAfterSchema, allow_none=True)


class BatchListQuerySchema(BaseSchema):
    """`GET /v1/batches`: newest first, a page at a time."""

    after = fields.String(validate=validate.Length(min=1, max=80))
    limit = fields.Integer(load_default=20, validate=validate.Range(1, 100))


batch_create_schema = BatchCreateSchema()
batch_list_query_schema = BatchListQuerySchema()
