"""An upload kept in the store: the multipart form read within LLM_MAX_FILE_BYTES, the file copied
in a chunk at a time, and one past the limit (a body without a length) deleted again."""

from __future__ import annotations

from flask import Response, jsonify, request
from werkzeug.exceptions import RequestEntityTooLarge

from app.api.files.schemas import upload_form_schema
from app.api.http import store_access
from app.api.http.body import form_parts
from app.api.http.errors import InvalidRequestError, PayloadTooLargeError
from app.settings.current import current_config
from app.store.files import new_file_id


def uploaded() -> Response:
    """The File object of the upload (multipart: `file`, `purpose`, optional `expires_after`)."""
    limit = current_config().max_file_bytes
    request.max_content_length = limit + 64 * 1024  # the form's other fields and boundaries too
    try:
        upload = request.files.get("file")
        form = upload_form_schema.load({key: values[0] for key, values in form_parts().items()})
    except RequestEntityTooLarge:
        raise _too_large(limit) from None
    if upload is None:
        raise InvalidRequestError("A multipart form with a `file` field is needed.", param="file")
    files = store_access.needed("files", "file_id").files
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
        raise _too_large(limit)
    return jsonify(created)


def _too_large(limit: int) -> PayloadTooLargeError:
    return PayloadTooLargeError(
        f"The file is larger than this server takes ({limit} bytes, LLM_MAX_FILE_BYTES).", param="file"
    )
