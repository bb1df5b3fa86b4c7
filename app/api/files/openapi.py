"""The Files family in the OpenAPI document: the multipart upload, the File object, lists and content."""

from __future__ import annotations

from typing import Any

from app.api.files.schemas import LISTED_PURPOSES, PURPOSES
from app.api.http.openapi import json_doc, list_schema, operation, page_params, query_param

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


# /v1/files: each file a 404 for a key that did not upload it; 413 past LLM_MAX_FILE_BYTES.
_MISSING = (401, 404, 503)
UPLOAD_FILE = operation(
    "Upload a file (multipart form: file, purpose, optional expires_after)",
    json_doc("The file.", "File"),
    (400, 401, 413, 503),
    body={"required": True, "content": {"multipart/form-data": {"schema": UPLOAD}}},
)
LIST = operation(
    "The key's files, newest first",
    json_doc("A page.", "FileList"),
    (400, 401, 503),
    parameters=[
        query_param("purpose", {"enum": list(LISTED_PURPOSES)}, "Only files of this purpose."),
        *page_params("A file", 10000, 10000),
    ],
)
RETRIEVE = operation("A file's facts", json_doc("The file.", "File"), _MISSING)
DELETE = operation("Delete a file", json_doc("Deleted.", "FileDeleted"), _MISSING)
CONTENT = operation(
    "A file's bytes",
    {
        "description": "The bytes, as uploaded.",
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    },
    _MISSING,
)
