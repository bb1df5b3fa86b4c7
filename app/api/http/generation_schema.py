"""The fields every generating request of OpenAI's shape and of llama-server's own shares: sampling,
stopping, constraints, LoRA scales, drafts (chat and text completions, /completion, /infill)."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields, validate, validates_schema

from app.api.http.fields import (
    SamplersField,
    StopField,
    StrictBoolean,
    StrictInteger,
    count,
    number,
    priority_field,
)
from app.api.http.schemas import BaseSchema, LoraSchema
from app.api.requests.generation import constraints_asked


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
