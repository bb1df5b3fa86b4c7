"""The transcription form's fields (multipart: every value a string, as the SDKs send them)."""

from __future__ import annotations

from marshmallow import fields, validate

from app.api.http.schemas import BaseSchema

FORMATS = ("json", "text", "srt", "verbose_json", "vtt")
STREAMED_FORMATS = ("json", "text")  # OpenAI streams only these: the others need the whole transcript


class TranscriptionFormSchema(BaseSchema):
    """`POST /v1/audio/transcriptions`'s fields beside `file` (lists with bracketed names, as the SDK
    sends them; loaded from the form as lists)."""

    model = fields.String(validate=validate.Length(min=1, max=256))
    language = fields.String(validate=validate.Regexp(r"^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})?$"))
    prompt = fields.String(validate=validate.Length(max=4000))
    response_format = fields.String(load_default="json", validate=validate.OneOf(FORMATS))
    # OpenAI's default: the most likely transcript (llama-server's is its sampling default).
    temperature = fields.Float(load_default=0.0, validate=validate.Range(0, 2))
    stream = fields.Boolean(load_default=False)
    max_tokens = fields.Integer(validate=validate.Range(1, 1 << 20))
    granularities = fields.List(
        fields.String(validate=validate.OneOf(("segment", "word"))), data_key="timestamp_granularities[]"
    )
    include = fields.List(fields.String(validate=validate.OneOf(("logprobs",))), data_key="include[]")


transcription_form_schema = TranscriptionFormSchema()
