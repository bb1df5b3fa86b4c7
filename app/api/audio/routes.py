"""`POST /v1/audio/transcriptions`: a clip's transcript from a model that hears (an audio projector)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request
from werkzeug.exceptions import RequestEntityTooLarge

from app.api.audio import openapi as doc
from app.api.audio import transcripts
from app.api.audio.presenter import TranscriptionFacts, TranscriptionPresenter
from app.api.audio.schemas import STREAMED_FORMATS, transcription_form_schema
from app.api.generation.loop import generate
from app.api.generation.planning import plan_choices
from app.api.generation.served import plan_inputs
from app.api.http import media
from app.api.http.body import check_model, form_parts, generating_engine
from app.api.http.errors import InvalidRequestError
from app.api.http.openapi import documented
from app.api.prompting import conversation
from app.api.requests.chat import ChatRequest
from app.api.routing.front import routed
from app.engine.types import Sampling
from app.settings.current import current_config

bp = Blueprint("audio", __name__)


@bp.post("/v1/audio/transcriptions")
@bp.post("/audio/transcriptions")
@documented(doc.TRANSCRIBE)
@routed(source="form", streams=True, reads=lambda: _read_upload())
def create_transcription() -> Response:
    """Transcribe the uploaded clip (multipart: `file`, `model`, `response_format`, `language`, ...)."""
    asked, clip = _form()
    engine = generating_engine()
    tokenizer, config = engine.tokenizer, current_config()
    projector = tokenizer.projector
    if projector is None or not projector.capabilities.audio:
        raise InvalidRequestError(
            f"The model {config.model_id!r} does not take audio: serve it with an audio projector "
            '(LLM_MMPROJ, or "mmproj" in LLM_MODELS).',
            param="file",
        )
    try:
        seconds = media.audio_seconds(clip, "file")  # the header read once: checked, and the duration
    except media.MediaError as exc:
        raise InvalidRequestError(f"file: the clip {exc}", param="file") from None
    chat = ChatRequest(
        model=asked.get("model"),
        messages=transcripts.asr_messages(
            tokenizer.chat_template or "",
            asked.get("prompt"),
            asked.get("language"),
            media.marker("audio", clip),
        ),
        max_tokens=asked.get("max_tokens"),
        sampling=Sampling(temperature=asked["temperature"]),
        stream=asked["stream"],
    )
    inputs = plan_inputs()
    prompt = conversation.prompt(tokenizer, chat, inputs.config)
    scored = asked["response_format"] == "verbose_json" or "logprobs" in asked.get("include", ())
    requests = plan_choices(
        chat,
        [prompt.tokens],
        inputs,
        prompt_param="file",
        logprobs=0 if scored else None,
        vocabulary_size=tokenizer.vocabulary_size,
        media=prompt.media,
    )
    facts = TranscriptionFacts(
        response_format=asked["response_format"],
        language=asked.get("language"),
        duration=seconds,
        temperature=asked["temperature"],
        prompt_tokens=len(prompt.tokens),
        audio_tokens=sum(run.length for run in prompt.media),
        logprobs="logprobs" in asked.get("include", ()),
        reader=prompt.reader,
    )
    return generate(engine, chat.stream, requests, TranscriptionPresenter(facts), len(prompt.tokens))


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


def _form() -> tuple[dict[str, Any], bytes]:
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
    return loaded, media.within_limit(upload.read(), "file")
