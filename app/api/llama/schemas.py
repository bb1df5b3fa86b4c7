"""The marshmallow schema of llama-server's own `POST /completion`: one prompt, n_predict, n_probs."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields, post_load, validate, validates_schema

from app.api.http import media
from app.api.http.fields import StrictBoolean, StrictInteger, count
from app.api.http.generation_schema import GenerationSchema
from app.api.http.media import MediaError
from app.api.http.schemas import BaseSchema
from app.api.requests.completion import (
    InfillRequest,
    LlamaCompletionRequest,
    infill_request,
    llama_completion_request,
)


class PromptField(fields.Field[str | list[int]]):
    """One prompt: a string, a list of token ids, or llama-server's multimodal object
    (`prompt_string` with its `<__media__>` markers, `multimodal_data` as base64, one per marker);
    llama-server's several-prompt forms are refused."""

    OPENAPI = {
        "anyOf": [
            {"type": "string"},
            {"type": "array", "items": {"type": "integer", "minimum": 0}},
            {
                "type": "object",
                "properties": {
                    "prompt_string": {"type": "string"},
                    "multimodal_data": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["prompt_string"],
            },
        ]
    }

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str | list[int]:
        if isinstance(value, str):
            return value
        if isinstance(value, list) and value and all(type(t) is int and t >= 0 for t in value):
            return value
        if isinstance(value, dict) and isinstance(value.get("prompt_string"), str):
            return _multimodal(value["prompt_string"], value.get("multimodal_data") or [])
        raise ValidationError(
            "must be a string, a non-empty list of token ids or {prompt_string, multimodal_data} "
            "(one prompt per request)"
        )


def _multimodal(text: str, data: Any) -> str:
    """llama-server's multimodal prompt as text carrying its media: each marker, in order, one item."""
    pieces = text.split(media.SHOWN)
    if not isinstance(data, list) or not all(isinstance(item, str) for item in data):
        raise ValidationError("multimodal_data must be a list of base64 strings")
    if len(data) != len(pieces) - 1:
        raise ValidationError(
            f"has {len(pieces) - 1} {media.SHOWN} markers in prompt_string "
            f"for {len(data)} multimodal_data items"
        )
    out = [pieces[0]]
    for index, (item, after) in enumerate(zip(data, pieces[1:], strict=True)):
        try:
            out += [media.embed("image", media.from_base64(item, f"multimodal_data[{index}]")), after]
        except MediaError as exc:
            raise ValidationError(f"multimodal_data[{index}] {exc}") from None
    return "".join(out)


class LlamaCompletionSchema(GenerationSchema):
    """llama-server's fields beside the sampling ones every completion shares."""

    prompt = PromptField(required=True)
    n_predict = StrictInteger(allow_none=True, validate=validate.Range(min=-1))  # -1: up to the context
    n_probs = count(0, 100)  # each token's log-probability and the n likeliest, per token
    n_cmpl = count(1, 128)  # several completions of the prompt (`n` is its alias), up to LLM_MAX_N
    return_tokens = StrictBoolean(allow_none=True)  # the generated token ids, in `tokens`
    post_sampling_probs = StrictBoolean(allow_none=True)
    cache_prompt = StrictBoolean(allow_none=True)  # always on here: taken and ignored
    id_slot = StrictInteger(allow_none=True)  # sequences are chosen by the server: taken and ignored
    # llama-server's limits for editors: a line indented less than n_indent ends the answer
    # before it; generating longer than t_max_predict_ms, the next newline ends it.
    n_indent = count(0, 1 << 10)
    t_max_predict_ms = count(0)

    @validates_schema
    def probabilities_before_sampling(self, data: dict[str, Any], **kwargs: Any) -> None:
        if data.get("post_sampling_probs"):
            message = "only false is supported: n_probs gives log-probabilities before sampling"
            raise ValidationError(message, "post_sampling_probs")

    @post_load
    def typed(self, data: dict[str, Any], **kwargs: Any) -> LlamaCompletionRequest:
        return llama_completion_request(data)


class ExtraChunkSchema(BaseSchema):
    """One chunk of another file, as editor plugins send them."""

    text = fields.String(required=True)
    filename = fields.String(allow_none=True)


class InfillSchema(LlamaCompletionSchema):
    """llama-server's `/infill`: the code before and after the cursor, chunks of other files, and
    what was typed (`prompt`, optional here)."""

    prompt = fields.String(load_default="")  # type: ignore[assignment]  # text only, after the prefix
    input_prefix = fields.String(required=True)
    input_suffix = fields.String(required=True)
    input_extra = fields.List(
        fields.Nested(ExtraChunkSchema), allow_none=True, validate=validate.Length(max=1024)
    )

    @post_load
    def typed(self, data: dict[str, Any], **kwargs: Any) -> InfillRequest:
        return infill_request(data)


llama_completion_schema = LlamaCompletionSchema()
infill_schema = InfillSchema()
