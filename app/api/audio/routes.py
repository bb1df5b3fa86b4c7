"""`POST /v1/audio/transcriptions`: a clip's transcript from a model that hears (an audio projector)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request
from werkzeug.exceptions import RequestEntityTooLarge

from app.api.audio import openapi as doc
from app.api.audio import serving
from app.api.audio.request import TranscriptionRequest
from app.api.audio.schemas import STREAMED_FORMATS, transcription_form_schema
from app.api.http import media
from app.api.http.body import check_model, form_parts
from app.api.http.errors import InvalidRequestError
from app.api.http.openapi import documented
from app.api.routing.front import routed
from app.settings.current import current_config

bp = Blueprint("audio", __name__)


@bp.post("/v1/audio/transcriptions")
@bp.post("/audio/transcriptions")
@documented(doc.TRANSCRIBE)
@routed(source="form", streams=True, reads=lambda: _read_upload())
def create_transcription() -> Response:
    """Transcribe the uploaded clip (multipart: `file`, `model`, `response_format`, `language`, ...)."""
    return serving.transcribed(_form())


def _read_upload() -> None:
    """The multipart body read whole, within LLM_MAX_MEDIA_BYTES (a 413 naming `file`), and kept:
    the front reads `model` from it, and a relay sends it on as it came."""
    limit = current_config().max_media_bytes
    request.max_content_length = limit + 64 * 1024  # the form's other fields and boundaries too
    try:
        request.get_data()
        request.files  # noqa: B018 - parsed now, within the limit
    except RequestEntityTooLarge:
        raise media.too_large("file", limit) from None


def _form() -> TranscriptionRequest:
    """The form's fields, checked, and the clip's bytes (within LLM_MAX_MEDIA_BYTES: a 413)."""
    _read_upload()
    upload = request.files.get("file")
    form = form_parts()
    loaded: dict[str, Any] = transcription_form_schema.load(
        {key: values if key.endswith("[]") else values[-1] for key, values in form.items()}
    )
    check_model(loaded.get("model"), "generate")
    if upload is None:
        raise InvalidRequestError(
            "A multipart form with the audio clip in a `file` field is needed.", param="file"
        )
    if loaded["stream"] and loaded["response_format"] not in STREAMED_FORMATS:
        raise InvalidRequestError(
            f"response_format {loaded['response_format']!r} cannot be streamed: it needs the whole "
            "transcript (json or text can).",
            param="stream",
        )
    if "word" in loaded.get("granularities", ()):
        raise InvalidRequestError(
            "Word timestamps are not available: an audio language model gives none (segment is).",
            param="timestamp_granularities[]",
        )
    return TranscriptionRequest(
        clip=media.within_limit(upload.read(), "file"),
        model=loaded.get("model"),
        language=loaded.get("language"),
        prompt=loaded.get("prompt"),
        response_format=loaded["response_format"],
        temperature=loaded["temperature"],
        stream=loaded["stream"],
        max_tokens=loaded.get("max_tokens"),
        logprobs="logprobs" in loaded.get("include", ()),
    )
