"""Marshmallow schemas of chat and text completion requests, with OpenAI's types and bounds."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields, post_load, validate, validates_schema

from app.api.chat.prediction_schema import PredictionSchema
from app.api.chat.structured_schemas import StructureSchema, VllmConstraintsSchema, check_begins
from app.api.http.fields import (
    ContentField,
    JsonTextOrObjectField,
    SamplersField,
    StopField,
    StrictBoolean,
    StrictInteger,
    TextsOrTokensField,
    ToolChoiceField,
    count,
    number,
    priority_field,
)
from app.api.http.schemas import BaseSchema, LoraSchema
from app.api.requests.chat import ChatRequest, chat_request
from app.api.requests.completion import CompletionRequest, completion_request
from app.api.requests.generation import constraints_asked

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


class StreamOptionsSchema(BaseSchema):
    """`stream_options`."""

    include_usage = StrictBoolean(load_default=False, allow_none=True)


class GenerationSchema(BaseSchema):
    """Fields shared by chat and text completions."""

    model = fields.String(allow_none=True)
    max_tokens = count(1)
    # vLLM's: only requests with the same salt (and of the same tenant) share cached prompts.
    cache_salt = fields.String(allow_none=True, validate=validate.Length(min=1, max=256))
    temperature = number(0, 2)
    top_p = number(0, 1, low_inclusive=False)
    top_k = count(0)
    min_p = number(0, 1)
    repeat_penalty = number(0)
    presence_penalty = number(-2, 2)
    frequency_penalty = number(-2, 2)
    # llama-server's sampling fields, through llama.cpp's own samplers (see sampler_chain.py).
    # Windows are ring buffers llama.cpp allocates per sequence: bounded (4 MiB at most).
    repeat_last_n = StrictInteger(allow_none=True, validate=validate.Range(min=-1, max=1 << 20))
    penalize_nl = StrictBoolean(allow_none=True)  # taken, with no effect, as llama-server now does
    typical_p = number(0, 1)
    min_keep = count(0, 1024)
    top_n_sigma = number(-1)
    xtc_probability = number(0, 1)
    xtc_threshold = number(0, 1)
    dynatemp_range = number(0)
    dynatemp_exponent = number(0)
    dry_multiplier = number(0)
    dry_base = number(1)
    dry_allowed_length = count(0, 1 << 20)
    dry_penalty_last_n = StrictInteger(allow_none=True, validate=validate.Range(min=-1, max=1 << 20))
    dry_sequence_breakers = fields.List(
        fields.String(validate=validate.Length(min=1, max=40)),
        allow_none=True,
        validate=validate.Length(max=32),
    )
    mirostat = StrictInteger(allow_none=True, validate=validate.OneOf([0, 1, 2]))
    mirostat_tau = number(0)
    mirostat_eta = number(0, 1)
    samplers = SamplersField(allow_none=True)
    # llama-server's per-request LoRA scales; adapters it leaves out are off (scale 0) for it.
    lora = fields.List(fields.Nested(LoraSchema), allow_none=True, validate=validate.Length(max=64))
    stop = StopField(allow_none=True)
    seed = StrictInteger(allow_none=True)
    stream = StrictBoolean(allow_none=True)
    stream_options = fields.Nested(StreamOptionsSchema, allow_none=True)
    # llama-server's: its `timings` object on every streamed event, not only on the last.
    timings_per_token = StrictBoolean(allow_none=True)
    # llama-server's: streamed `prompt_progress` (total, cache, processed, time_ms) while the prompt
    # evaluates, each on an event of the stream's own kind.
    return_progress = StrictBoolean(allow_none=True)
    # llama-server's constraints on every completion: a JSON schema (through llama.cpp's
    # converter; {} any object), or GBNF as llama.cpp reads it.
    json_schema = fields.Dict(allow_none=True)
    grammar = fields.String(allow_none=True)
    user = fields.String(allow_none=True)
    n = count(1, 128)
    logit_bias = fields.Dict(
        keys=fields.String(), values=number(-100, 100), allow_none=True, validate=validate.Length(max=1024)
    )
    best_of = count(1, 128)
    priority = priority_field()  # vLLM's: a waiting request with a lower value starts first
    # llama.cpp's and vLLM's: generate past end-of-text (benchmarks), or at least this many tokens.
    ignore_eos = StrictBoolean(allow_none=True)
    min_tokens = count(0)
    # llama-server's context shift (LLM_CONTEXT_SHIFT=1): prompt tokens kept when the context is
    # full (-1: all), and tokens dropped after them (0: half of the rest).
    n_keep = StrictInteger(allow_none=True, validate=validate.Range(min=-1, max=1 << 20))
    n_discard = count(0, 1 << 20)
    # Speculative decoding, as llama-server takes it per request: false turns it off for this
    # request, true on (n-gram drafts, even where the server's default is none); the draft
    # lengths under its dotted names (n_max 0: off).
    speculative = StrictBoolean(allow_none=True)
    speculative_n_max = StrictInteger(
        allow_none=True, validate=validate.Range(min=0, max=256), data_key="speculative.n_max"
    )
    speculative_n_min = StrictInteger(
        allow_none=True, validate=validate.Range(min=0, max=256), data_key="speculative.n_min"
    )

    @validates_schema
    def draft_lengths_in_order(self, data: dict[str, Any], **kwargs: Any) -> None:
        low, high = data.get("speculative_n_min"), data.get("speculative_n_max")
        if low is not None and high is not None and low > high:
            raise ValidationError("must not exceed speculative.n_max", "speculative.n_min")

    @validates_schema
    def best_of_at_least_n(self, data: dict[str, Any], **kwargs: Any) -> None:
        """best_of > n would need ranking by log-probability, which this server does not do."""
        best_of = data.get("best_of")
        if best_of is not None and best_of != (data.get("n") or 1):
            raise ValidationError("only best_of equal to n (or left out) is supported", "best_of")

    @validates_schema
    def one_constraint(self, data: dict[str, Any], **kwargs: Any) -> None:
        """As llama-server (a JSON schema or a grammar) and vLLM (one kind of structured output):
        one constraint per request, `response_format` included."""
        asked = [c.param for c in constraints_asked(data)]
        if (data.get("response_format") or {}).get("type", "text") != "text":
            asked.insert(0, "response_format")
        if len(asked) > 1:
            others = ", ".join(asked[:-1])
            raise ValidationError(f"cannot be used with {others}: one constraint only", asked[-1])


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
