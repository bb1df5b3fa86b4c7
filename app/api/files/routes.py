"""`/v1/files`: upload (multipart), list, read, download and delete files, each owned by an API key."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.api.files import openapi as doc
from app.api.files import serving
from app.api.files.schemas import file_list_query_schema
from app.api.http import store_access
from app.api.http.openapi import documented
from app.store.files import FileStore

bp = Blueprint("files", __name__)


def _files() -> FileStore:
    return store_access.needed("files", "file_id").files


def _found(file_id: str) -> tuple[FileStore, dict[str, object]]:
    files = _files()
    return files, store_access.found(files.get, file_id, f"No such File object: {file_id}", "file_id")


@bp.post("/v1/files")
@documented(doc.UPLOAD_FILE)
def upload_file() -> Response:
    """Keep an uploaded file (multipart: `file`, `purpose`, optional `expires_after`)."""
    return serving.uploaded()


@bp.get("/v1/files")
@documented(doc.LIST)
def list_files() -> Response:
    query = store_access.query(file_list_query_schema)
    after = query.get("after")
    return jsonify(
        store_access.page(
            lambda owner: _files().list(owner, query.get("purpose"), after, query["limit"], query["order"]),
            f"No file with id '{after}'.",
        )
    )


@bp.get("/v1/files/<file_id>")
@documented(doc.RETRIEVE)
def get_file(file_id: str) -> Response:
    return jsonify(_found(file_id)[1])


@bp.get("/v1/files/<file_id>/content")
@documented(doc.CONTENT)
def file_content(file_id: str) -> Response:
    """The file's bytes, streamed a chunk at a time."""
    files, found = _found(file_id)
    return Response(
        files.content(file_id),
        mimetype="application/octet-stream",
        headers={
            "Content-Length": str(found["bytes"]),
            "Content-Disposition": f'attachment; filename="{file_id}"',
        },
    )


@bp.delete("/v1/files/<file_id>")
@documented(doc.DELETE)
def delete_file(file_id: str) -> Response:
    files, _ = _found(file_id)
    with store_access.reachable():
        files.delete(store_access.owner(), file_id)
    return jsonify({"id": file_id, "object": "file", "deleted": True})
