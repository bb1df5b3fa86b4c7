"""The body of a slot save or restore, and the file names it may use."""

from __future__ import annotations

from marshmallow import fields

from app.api.http.schemas import BaseSchema

FORBIDDEN = set('/\\:*?"<>|')  # separators, and characters some file systems refuse


class SlotFileSchema(BaseSchema):
    """`{"filename": ...}`: a file of LLM_SLOT_SAVE_PATH."""

    filename = fields.String(required=True)


def valid_filename(name: str) -> bool:
    """A plain name within the folder: no separator, no `..`, not hidden, printable, at most 255 bytes
    (as llama-server's fs_validate_filename: a name never reaches outside LLM_SLOT_SAVE_PATH)."""
    if not name or len(name.encode("utf-8", "surrogatepass")) > 255 or name != name.strip():
        return False
    if name.startswith(".") or any(char in FORBIDDEN or not char.isprintable() for char in name):
        return False
    return True


slot_file_schema = SlotFileSchema()
