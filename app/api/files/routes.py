"""`/v1/files`: upload (multipart), list, read, download and delete files, each owned by an API key."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request
from werkzeug.exceptions import RequestEntityTooLarge

from app.api.files import openapi as doc
from app.api.files.schemas import file_list_query_schema, upload_form_schema
from app.api.http import store_access
from app.api.http.body import form_parts
from app.api.http.errors import InvalidRequestError, PayloadTooLargeError
from app.api.http.openapi import documented
from app.settings.current import current_config
from app.store.files import FileStore, new_file_id

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
    limit = current_config().max_file_bytes
    request.max_content_length = limit + 64 * 1024  # the form's other fields and boundaries too
    try:
        upload = request.files.get("file")
        form = upload_form_schema.load({key: values[0] for key, values in form_parts().items()})
    except RequestEntityTooLarge:
        raise PayloadTooLargeError(
            f"The file is larger than this server takes ({limit} bytes, LLM_MAX_FILE_BYTES).", param="file"
        ) from None
    if upload is None:
        raise InvalidRequestError("A multipart form with a `file` field is needed.", param="file")
    files = _files()
    filename = (upload.filename or "upload")[:400]
    with store_access.reachable():
        created = files.create(
            store_access.owner(),
            new_file_id(),
            filename,
            form["purpose"],
            upload.stream,
            form.get("seconds"),
        )
    if created["bytes"] > limit:  # a body without a length, cut off only after reading it
        with store_access.reachable():
            files.delete(store_access.owner(), str(created["id"]))
        raise PayloadTooLargeError(
            f"The file is larger than this server takes ({limit} bytes, LLM_MAX_FILE_BYTES).", param="file"
        )
    return jsonify(created)


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
