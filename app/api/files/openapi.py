"""The Files family in the OpenAPI document: the multipart upload, the File object, lists and content."""

from __future__ import annotations

from typing import Any

from apispec import APISpec

from app.api.files.schemas import LISTED_PURPOSES, PURPOSES
from app.api.http.openapi import (
    error_responses,
    json_doc,
    list_schema,
    page_params,
    path_params,
    query_param,
)
from app.settings.models import ModelSpec

_STR, _INT = {"type": "string"}, {"type": "integer"}
COMPONENTS: dict[str, dict[str, Any]] = {
    "File": {
        "type": "object",
        "required": ["id", "object", "bytes", "created_at", "expires_at", "filename", "purpose", "status"],
        "properties": {
            "id": _STR,
            "object": {"const": "file"},
            "bytes": _INT,
            "created_at": _INT,
            "expires_at": {"anyOf": [_INT, {"type": "null"}]},
            "filename": _STR,
            "purpose": {"enum": list(LISTED_PURPOSES)},
            "status": {"const": "processed"},
            "status_details": {"type": "null"},
        },
    },
    "FileDeleted": {
        "type": "object",
        "required": ["id", "object", "deleted"],
        "properties": {"id": _STR, "object": {"const": "file"}, "deleted": {"const": True}},
    },
    "FileList": list_schema("File"),
}
UPLOAD = {
    "type": "object",
    "required": ["file", "purpose"],
    "properties": {
        "file": {"type": "string", "format": "binary"},
        "purpose": {"enum": list(PURPOSES)},
        "expires_after[anchor]": {"const": "created_at"},
        "expires_after[seconds]": {"type": "integer", "minimum": 3600, "maximum": 2592000},
    },
}


def describe(spec: APISpec, models: tuple[ModelSpec, ...]) -> None:
    """/v1/files: each file a 404 for a key that did not upload it; 413 past LLM_MAX_FILE_BYTES."""
    for name, schema in COMPONENTS.items():
        spec.components.schema(name, component=schema)
    file_id = path_params("file_id")
    missing = error_responses(401, 404, 503)
    spec.path(
        path="/v1/files",
        operations={
            "post": {
                "summary": "Upload a file (multipart form: file, purpose, optional expires_after)",
                "requestBody": {"required": True, "content": {"multipart/form-data": {"schema": UPLOAD}}},
                "responses": {
                    200: json_doc("The file.", "File"),
                    **error_responses(400, 401, 413, 503),
                },
            },
            "get": {
                "summary": "The key's files, newest first",
                "parameters": [
                    query_param("purpose", {"enum": list(LISTED_PURPOSES)}, "Only files of this purpose."),
                    *page_params("A file", 10000, 10000),
                ],
                "responses": {200: json_doc("A page.", "FileList"), **error_responses(400, 401, 503)},
            },
        },
    )
    spec.path(
        path="/v1/files/{file_id}",
        operations={
            "get": {"summary": "A file's facts", "parameters": file_id,
                    "responses": {200: json_doc("The file.", "File"), **missing}},
            "delete": {"summary": "Delete a file", "parameters": file_id,
                       "responses": {200: json_doc("Deleted.", "FileDeleted"), **missing}},
        },
    )  # fmt: skip
    content = {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}
    spec.path(
        path="/v1/files/{file_id}/content",
        operations={
            "get": {
                "summary": "A file's bytes",
                "parameters": file_id,
                "responses": {200: {"description": "The bytes, as uploaded.", "content": content}, **missing},
            }
        },
    )
