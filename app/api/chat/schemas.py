"""Marshmallow schemas of chat and text completion requests, with OpenAI's types and bounds."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields, post_load, validate, validates_schema

from app.api.chat.prediction_schema import PredictionSchema
from app.api.chat.structured_schemas import StructureSchema, VllmConstraintsSchema, check_begins
from app.api.http.fields import (
    ContentField,
    JsonTextOrObjectField,
    StrictBoolean,
    TextsOrTokensField,
    ToolChoiceField,
    count,
)
from app.api.http.generation_schema import GenerationSchema
from app.api.http.schemas import BaseSchema
from app.api.requests.chat import ChatRequest, chat_request
from app.api.requests.completion import CompletionRequest, completion_request

ROLES = ("system", "developer", "user", "assistant", "tool")
# What the server gives a chat template itself (llama-cpp-python's formatter and our tools).
TEMPLATE_VARIABLES = frozenset(
    ("messages", "tools", "tool_choice", "functions", "function_call", "add_generation_prompt",
     "bos_token", "eos_token", "raise_exception", "strftime_now")
)  # fmt: skip


class CalledFunctionSchema(BaseSchema):
    """The function an earlier assistant turn called, and its arguments (JSON text, or an object)."""

    name = fields.String(required=True)
    arguments = JsonTextOrObjectField(required=True)


class MessageToolCallSchema(BaseSchema):
    """One call of an earlier assistant turn, as OpenAI writes it back into the conversation."""

    id = fields.String(required=True)
    type = fields.String(load_default="function", validate=validate.Equal("function"))
    function = fields.Nested(CalledFunctionSchema, required=True)


class MessageSchema(BaseSchema):
    """One chat message."""

    role = fields.String(required=True, validate=validate.OneOf(ROLES))
    content = ContentField(load_default=None, allow_none=True)
    name = fields.String(allow_none=True)
    tool_calls = fields.List(fields.Nested(MessageToolCallSchema), allow_none=True)
    tool_call_id = fields.String(allow_none=True)
    # An assistant turn's reasoning, handed back (llama-server's field) for templates that show it.
    reasoning_content = fields.String(allow_none=True)

    @validates_schema
    def require_content(self, data: dict[str, Any], **kwargs: Any) -> None:
        """Only an assistant message that calls tools may leave out its content."""
        if data.get("content") is None and not (data["role"] == "assistant" and data.get("tool_calls")):
            raise ValidationError("is required for this role", "content")


class FunctionSchema(BaseSchema):
    """A function the model may call."""

    name = fields.String(required=True, validate=validate.Regexp(r"^[A-Za-z0-9_-]{1,64}$"))
    description = fields.String(allow_none=True)
    parameters = fields.Dict(allow_none=True)
    strict = StrictBoolean(allow_none=True)


class ToolSchema(BaseSchema):
    """One entry of `tools`."""

    type = fields.String(required=True, validate=validate.Equal("function"))
    function = fields.Nested(FunctionSchema, required=True)


class JsonSchemaFormatSchema(BaseSchema):
    """`response_format.json_schema`."""

    name = fields.String(required=True, validate=validate.Regexp(r"^[A-Za-z0-9_-]{1,64}$"))
    description = fields.String(allow_none=True)
    schema = fields.Dict(allow_none=True)
    strict = StrictBoolean(allow_none=True)


class ResponseFormatSchema(BaseSchema):
    """`response_format`: free text, any JSON object, or JSON following a schema."""

    type = fields.String(
        required=True, validate=validate.OneOf(["text", "json_object", "json_schema", "structural_tag"])
    )
    json_schema = fields.Nested(JsonSchemaFormatSchema, allow_none=True)
    schema = fields.Dict(allow_none=True)  # llama-server's {"type": "json_object", "schema": ...}
    # vLLM's {"type": "structural_tag", "structures": [...], "triggers": [...]}
    structures = fields.List(fields.Nested(StructureSchema), validate=validate.Length(min=1, max=64))
    triggers = fields.List(
        fields.String(validate=validate.Length(min=1, max=64)), validate=validate.Length(min=1, max=16)
    )

    @validates_schema
    def schema_given(self, data: dict[str, Any], **kwargs: Any) -> None:
        """A json_schema format needs its json_schema."""
        if data["type"] == "json_schema" and not data.get("json_schema"):
            raise ValidationError("is required when type is json_schema", "json_schema")
        if data["type"] == "structural_tag":
            for name in ("structures", "triggers"):
                if not data.get(name):
                    raise ValidationError("is required when type is structural_tag", name)
            check_begins(data)


class OpenAIGenerationSchema(VllmConstraintsSchema, GenerationSchema):
    """OpenAI's two completion routes: vLLM's constraints beside llama-server's, and what OpenAI
    refuses beyond the fields' own rules."""

    # OpenAI's: requests that share a key go to the same worker (and its cache).
    prompt_cache_key = fields.String(allow_none=True, validate=validate.Length(max=1024))
    # OpenAI's predicted output: drafts for speculative decoding (app/engine/speculative/prediction.py).
    prediction = fields.Nested(PredictionSchema, allow_none=True)

    @validates_schema
    def stream_options_only_when_streaming(self, data: dict[str, Any], **kwargs: Any) -> None:
        """As OpenAI: stream_options on an answer that is not streamed is a mistake, not a no-op."""
        if data.get("stream_options") is not None and not data.get("stream"):
            raise ValidationError("is only allowed when 'stream' is enabled", "stream_options")


class ChatCompletionRequestSchema(OpenAIGenerationSchema):
    """`POST /v1/chat/completions`."""

    messages = fields.List(fields.Nested(MessageSchema), required=True, validate=validate.Length(min=1))
    max_completion_tokens = count(1)
    logprobs = StrictBoolean(allow_none=True)
    top_logprobs = count(0, 20)
    response_format = fields.Nested(ResponseFormatSchema, allow_none=True)
    tools = fields.List(fields.Nested(ToolSchema), allow_none=True, validate=validate.Length(max=128))
    tool_choice = ToolChoiceField(allow_none=True)
    parallel_tool_calls = StrictBoolean(allow_none=True)
    # llama-server's and vLLM's: variables for the chat template (enable_thinking...), and
    # whether reasoning is split into reasoning_content (`none`: left in the content).
    chat_template_kwargs = fields.Dict(keys=fields.String(), allow_none=True)
    reasoning_format = fields.String(
        allow_none=True, validate=validate.OneOf(("auto", "deepseek", "deepseek-legacy", "none"))
    )
    # llama-server's --reasoning-budget, per request: tokens of thinking (-1: no limit)
    reasoning_budget = count(-1)
    reasoning_effort = fields.String(
        allow_none=True, validate=validate.OneOf(("none", "minimal", "low", "medium", "high"))
    )
    # vLLM's and llama-server's: continue the last assistant message (with add_generation_prompt
    # false), or template the messages without opening the assistant's turn.
    continue_final_message = StrictBoolean(allow_none=True)
    add_generation_prompt = StrictBoolean(allow_none=True)
    # The Responses API's, here too: "auto" drops the oldest turns that do not fit the context.
    truncation = fields.String(allow_none=True, validate=validate.OneOf(["auto", "disabled"]))

    @validates_schema
    def own_template_variables(self, data: dict[str, Any], **kwargs: Any) -> None:
        """chat_template_kwargs may not stand in for what the server itself gives the template."""
        taken = sorted(set(data.get("chat_template_kwargs") or {}) & TEMPLATE_VARIABLES)
        if taken:
            raise ValidationError(f"{', '.join(taken)}: set by the request itself", "chat_template_kwargs")

    @validates_schema
    def consistent_options(self, data: dict[str, Any], **kwargs: Any) -> None:
        """top_logprobs needs logprobs; a tool choice needs tools, and must name one of them."""
        if data.get("top_logprobs") and not data.get("logprobs"):
            raise ValidationError("needs logprobs: true", "top_logprobs")
        choice = data.get("tool_choice")
        names = {tool["function"]["name"] for tool in data.get("tools") or []}
        # OpenAI refuses any tool choice without tools; "none" is let through, as vLLM does,
        # since it asks for what happens anyway and some clients send it on every request.
        if choice not in (None, "none") and not names:
            raise ValidationError("is only allowed when 'tools' are specified", "tool_choice")
        if isinstance(choice, dict) and choice["name"] not in names:
            raise ValidationError(f"names {choice['name']!r}, which is not in tools", "tool_choice")

    @post_load
    def typed(self, data: dict[str, Any], **kwargs: Any) -> ChatRequest:
        return chat_request(data)


class CompletionRequestSchema(OpenAIGenerationSchema):
    """`POST /v1/completions`."""

    prompt = TextsOrTokensField(16, required=True)
    max_tokens = count(0)  # 0 with echo: score the prompt, generate nothing (lm-eval's loglikelihood)
    echo = StrictBoolean(allow_none=True)
    suffix = fields.String(allow_none=True)
    logprobs = count(0, 5)

    @validates_schema
    def nothing_only_with_echo(self, data: dict[str, Any], **kwargs: Any) -> None:
        """max_tokens 0 makes sense only to score the prompt: with echo."""
        if data.get("max_tokens") == 0 and not data.get("echo"):
            raise ValidationError("may be 0 only with echo: true (to score the prompt)", "max_tokens")

    @post_load
    def typed(self, data: dict[str, Any], **kwargs: Any) -> CompletionRequest:
        return completion_request(data)


chat_completion_schema = ChatCompletionRequestSchema()
completion_schema = CompletionRequestSchema()
