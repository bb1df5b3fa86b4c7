"""The marshmallow schema of llama-server's own `POST /completion`: one prompt, n_predict, n_probs."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields, post_load, validate, validates_schema

from app.api.chat.schemas import GenerationSchema
from app.api.http.fields import StrictBoolean, StrictInteger, count
from app.api.requests.completion import LlamaCompletionRequest, llama_completion_request


class PromptField(fields.Field[str | list[int]]):
    """One prompt: a string, or a list of token ids (llama-server's several-prompt forms are refused)."""

    OPENAPI = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "integer", "minimum": 0}}]}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str | list[int]:
        if isinstance(value, str):
            return value
        if isinstance(value, list) and value and all(type(t) is int and t >= 0 for t in value):
            return value
        raise ValidationError("must be a string or a non-empty list of token ids (one prompt per request)")


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

    @validates_schema
    def probabilities_before_sampling(self, data: dict[str, Any], **kwargs: Any) -> None:
        if data.get("post_sampling_probs"):
            message = "only false is supported: n_probs gives log-probabilities before sampling"
            raise ValidationError(message, "post_sampling_probs")
        if data.get("n_predict") == 0:
            raise ValidationError("must be -1 (up to the context) or at least 1", "n_predict")

    @post_load
    def typed(self, data: dict[str, Any], **kwargs: Any) -> LlamaCompletionRequest:
        return llama_completion_request(data)


llama_completion_schema = LlamaCompletionSchema()
