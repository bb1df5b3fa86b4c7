"""Marshmallow schemas of the Files API: the upload's form fields and the list query."""

from __future__ import annotations

from marshmallow import fields, validate

from app.api.http.schemas import BaseSchema

PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")  # what a client uploads
LISTED_PURPOSES = (*PURPOSES, "batch_output")  # and what the server writes: a batch's results


class UploadFormSchema(BaseSchema):
    """`POST /v1/files`'s form fields beside `file` (expires_after as the SDK sends it: bracketed names)."""

    purpose = fields.String(required=True, validate=validate.OneOf(PURPOSES))
    anchor = fields.String(data_key="expires_after[anchor]", validate=validate.Equal("created_at"))
    seconds = fields.Integer(data_key="expires_after[seconds]", validate=validate.Range(3600, 2592000))


class FileListQuerySchema(BaseSchema):
    """`GET /v1/files`: one purpose's, a page at a time."""

    purpose = fields.String(validate=validate.OneOf(LISTED_PURPOSES))
    after = fields.String(validate=validate.Length(min=1, max=80))
    limit = fields.Integer(load_default=10000, validate=validate.Range(1, 10000))
    order = fields.String(load_default="desc", validate=validate.OneOf(["asc", "desc"]))


upload_form_schema = UploadFormSchema()
file_list_query_schema = FileListQuerySchema()
