"""The audio family in the OpenAPI document: the transcription form, its answers and its stream."""

from __future__ import annotations

from typing import Any

from app.api.audio.schemas import FORMATS
from app.api.http.openapi import POST_ERRORS, Component, event_schema, operation

_STR, _COUNT, _NUMBER = {"type": "string"}, {"type": "integer", "minimum": 0}, {"type": "number"}
_LOGPROBS = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["token", "logprob", "bytes"],
        "properties": {"token": _STR, "logprob": _NUMBER, "bytes": {"type": "array", "items": _COUNT}},
    },
}
_USAGE = {
    "type": "object",
    "required": ["type", "input_tokens", "output_tokens", "total_tokens"],
    "properties": {
        "type": {"const": "tokens"},
        "input_tokens": _COUNT,
        "input_token_details": {
            "type": "object",
            "properties": {"text_tokens": _COUNT, "audio_tokens": _COUNT, "cached_tokens": _COUNT},
        },
        "output_tokens": _COUNT,
        "total_tokens": _COUNT,
    },
}
_SEGMENT_FIELDS = ("id", "seek", "start", "end", "text", "tokens", "temperature", "avg_logprob",
                   "compression_ratio", "no_speech_prob")  # fmt: skip
OBJECTS: dict[str, dict[str, Any]] = {
    "Transcription": {
        "type": "object",
        "required": ["text", "usage"],
        "properties": {"text": _STR, "usage": _USAGE, "logprobs": _LOGPROBS},
    },
    "TranscriptionVerbose": {
        "type": "object",
        "required": ["task", "language", "duration", "text", "segments", "usage"],
        "properties": {
            "task": {"const": "transcribe"},
            "language": _STR,
            "duration": _NUMBER,
            "text": _STR,
            "segments": {
                "type": "array",
                "items": {"type": "object", "required": list(_SEGMENT_FIELDS)},
            },
            "usage": {
                "type": "object",
                "required": ["type", "seconds"],
                "properties": {"type": {"const": "duration"}, "seconds": _COUNT},
            },
        },
    },
    "TranscriptionStreamChunk": {
        "type": "object",
        "required": ["type"],
        "properties": {
            "type": {"enum": ["transcript.text.delta", "transcript.text.done"]},
            "delta": _STR,
            "text": _STR,
            "logprobs": _LOGPROBS,
            "usage": _USAGE,
        },
    },
}
FORM = {
    "type": "object",
    "required": ["file"],
    "properties": {
        "file": {"type": "string", "format": "binary", "description": "WAV, MP3 or FLAC."},
        "model": _STR,
        "language": {**_STR, "description": "ISO-639-1, added to the instruction as llama-server does."},
        "prompt": {**_STR, "description": 'The instruction (default "Transcribe audio to text").'},
        "response_format": {"enum": list(FORMATS), "default": "json"},
        "temperature": {"type": "number", "minimum": 0, "maximum": 2, "default": 0},
        "stream": {"type": "boolean", "default": False},
        "max_tokens": {"type": "integer", "minimum": 1},
        "timestamp_granularities[]": {"type": "array", "items": {"const": "segment"}},
        "include[]": {"type": "array", "items": {"const": "logprobs"}},
    },
}
DESCRIPTION = (
    "`json`: the transcript and token usage; `verbose_json`: one segment over the whole clip; "
    "`text`, `srt`, `vtt`: plain text. With `stream: true` (json or text), Server-Sent Events: "
    "`transcript.text.delta` events, then `transcript.text.done` with the usage, then `[DONE]`."
)


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


COMPONENTS: dict[str, Component] = {
    **OBJECTS,
    "TranscriptionStreamChunkEvent": event_schema("TranscriptionStreamChunk"),
}


# At /v1/audio/transcriptions and llama-server's path without /v1.
TRANSCRIBE = operation(
    "Transcribe an audio clip (a model with an audio projector)",
    {
        "description": DESCRIPTION,
        "content": {
            "application/json": {"schema": {"anyOf": [_ref("Transcription"), _ref("TranscriptionVerbose")]}},
            "text/plain": {"schema": _STR},
            "text/event-stream": {"schema": _ref("TranscriptionStreamChunkEvent")},
        },
    },
    POST_ERRORS,
    body={"required": True, "content": {"multipart/form-data": {"schema": FORM}}},
)
