"""A typed request turned into the engine's plans: max_tokens, sampling, logit bias, one per choice.

Pure decisions over the request and `PlanInputs`, what the edge read from where it arrived (the
server's settings, the model's memory, the key, the priority header): nothing here reads Flask's
globals, so a loop that plans step after step away from the view (MCP calls, a background run)
plans as the view would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from app.api.http import cache_scope
from app.api.http.errors import ContextLengthError, InvalidRequestError, PermissionDeniedError
from app.api.http.fields import PRIORITIES
from app.api.requests.generation import AdapterScale, GenerationOptions
from app.engine.media import MediaRun
from app.engine.memory import MemoryKind
from app.engine.types import ChoicePlan, ContextShift, DraftLimits, ThinkingBudget
from app.settings.config import Config
from app.settings.models import ModelSpec


@dataclass(frozen=True)
class PlanInputs:
    """What planning takes from outside the request's body, read once at the edge."""

    config: Config
    memory: MemoryKind | None  # the model's memory, once loaded (context shift needs one that moves)
    key_name: str | None  # the API key's name (None: a server without keys), for the cache scope
    priority_header: str | None  # the value of LLM_PRIORITY_HEADER's header, if the request has one
    tenant: bool = False  # the key is a tenant's (not an operator's, nor a server without keys)
    session_header: str | None = None  # the value of an agent's session header (SESSION_HEADER), if sent


def plan(
    options: GenerationOptions, prompt_tokens: list[int], inputs: PlanInputs, *, prompt_param: str
) -> ChoicePlan:
    """Decide max_tokens and sampling, refusing what cannot fit the context before any byte is sent."""
    config = inputs.config
    if not prompt_tokens:  # nothing to generate from (the views give text prompts a first token)
        raise InvalidRequestError(f"{prompt_param} has no tokens to continue from.", param=prompt_param)
    asked, max_param = options.max_tokens, options.max_param  # errors name the field the client sent
    if asked is not None and asked > config.max_tokens_limit:
        raise InvalidRequestError(
            f"{max_param} is {asked}, above this server's limit of {config.max_tokens_limit}.",
            param=max_param,
        )
    room = config.n_ctx - len(prompt_tokens)
    shift = context_shift(options, inputs)  # past the context's end: llama-server's context shift, if on
    if asked is None:  # up to the context's end, shift or not: never an endless answer unasked
        max_tokens = min(config.default_max_tokens or room, config.max_tokens_limit, room)
    else:
        max_tokens = asked  # 0 only with echo (scoring a prompt): the schema and the view see to it
    if room < (0 if asked == 0 else 1) or (max_tokens > room and shift is None):
        raise ContextLengthError(
            f"This model's maximum context length is {config.n_ctx} tokens. However, you "
            f"requested {len(prompt_tokens) + max(max_tokens, 1)} tokens "
            f"({len(prompt_tokens)} in the {prompt_param}, {max(max_tokens, 1)} in the "
            f"completion). Please reduce the length of the {prompt_param} or completion.",
            param=prompt_param if asked is None else max_param,
        )
    if options.min_tokens > max_tokens:
        raise InvalidRequestError(
            f"min_tokens is {options.min_tokens}, above the {max_tokens} tokens this request may generate.",
            param="min_tokens",
        )
    scope = cache_scope.scope_of(inputs.key_name, config.cache_sharing, options.cache_salt)
    return ChoicePlan(
        prompt_tokens,
        max_tokens,
        options.sampling,
        list(options.stop),
        ignore_eos=options.ignore_eos,
        min_tokens=options.min_tokens,
        drafts=draft_limits(options, config),
        adapters=request_adapters(options, config.model),
        cache_scope=scope,
        session=session_of(scope, options.prompt_cache_key, inputs.session_header),
        priority=request_priority(
            options.priority, config.priority_header, inputs.priority_header, inputs.tenant
        ),
        progress=options.return_progress and options.stream,  # events only: a whole answer has none
        shift=shift if max_tokens > room else None,  # else the context never fills
    )


def session_of(scope: str, cache_key: str | None, header: str | None) -> str:
    """The conversation a request belongs to, within its cache scope (one tenant's key never names
    another's): OpenAI's `prompt_cache_key`, else an agent's session header; "" for none."""
    named = cache_key or header
    return f"{scope}\x00{named}" if named else ""


def context_shift(options: GenerationOptions, inputs: PlanInputs) -> ContextShift | None:
    """The request's context shift, where LLM_CONTEXT_SHIFT turns it on and the model's memory can
    move positions in cells of its own (not a unified cache, whose cells sequences may share)."""
    config, memory = inputs.config, inputs.memory
    unified = config.kv_size < config.parallel * config.n_ctx
    if not config.context_shift or memory is None or not memory.shifts or unified:
        return None
    return ContextShift(options.n_keep, options.n_discard)


def request_priority(asked: int, header: str | None, raw: str | None, tenant: bool = False) -> int:
    """The request's priority: `raw`, the value of LLM_PRIORITY_HEADER's `header` when the operator
    names one and the request carries it (a gateway sets it, over what the body says), else the
    body's `priority`, which a tenant may only raise (later than others: below 0 is ahead of them)."""
    if header is None or raw is None:
        if tenant and asked < 0:
            raise PermissionDeniedError(
                "priority: below 0 puts a request ahead of every other tenant's, which is for operators' "
                "keys (LLM_ADMIN_KEYS); 0 or more is this key's to choose.",
                param="priority",
                code="operator_only",
            )
        return asked
    low, high = PRIORITIES
    try:
        value = int(raw.strip())
    except ValueError:
        value = high + 1
    if not low <= value <= high:
        raise InvalidRequestError(
            f"The {header} header must be an integer from {low} to {high}; it is {raw[:40]!r}.", param=header
        )
    return value


def request_adapters(options: GenerationOptions, spec: ModelSpec) -> tuple[float, ...] | None:
    """The request's LoRA scales: its `model` naming an adapter of `spec` (vLLM's adapters as models:
    that adapter at 1, the others off), else its `lora` (llama-server's), else None (the globals)."""
    named = spec.adapter_named(options.model)
    if named is None:
        return adapter_scales(options.lora, spec)
    if options.lora is not None:
        raise InvalidRequestError(
            f"model names the LoRA adapter '{options.model}'; send lora only with the base model "
            f"('{spec.id}').",
            param="lora",
        )
    return tuple(1.0 if n == named else 0.0 for n in range(len(spec.loras)))


def adapter_scales(asked: Sequence[AdapterScale] | None, spec: ModelSpec) -> tuple[float, ...] | None:
    """llama-server's `lora` as one scale per adapter of model `spec` (those it leaves out: 0); None
    without it (the worker's global scales apply)."""
    if asked is None:
        return None
    scales = [0.0] * len(spec.loras)
    names = {n: lora.id for n, lora in spec.live_adapters()}  # an unloaded adapter's index stays empty
    for entry in asked:
        wanted = entry.id
        index = wanted if isinstance(wanted, int) else spec.adapter_named(wanted)
        if index is None or index not in names:
            known = ", ".join(f"{n} ({name!r})" for n, name in names.items()) or "none"
            raise InvalidRequestError(
                f"lora: the model '{spec.id}' has no LoRA adapter {wanted!r}; its adapters: {known}.",
                param="lora",
            )
        scales[index] = entry.scale
    return tuple(scales)


def draft_limits(options: GenerationOptions, config: Config) -> DraftLimits | None:
    """The request's own speculative decoding, if it asks for any: None leaves it to the server."""
    asked_max, asked_min, switch = options.speculative_n_max, options.speculative_n_min, options.speculative
    if switch is False:
        return DraftLimits(0)
    if switch is None and asked_max is None and asked_min is None:
        return None
    # Drafts need no model of their own, so a request may ask for them where the server's default is none.
    on = switch is True or bool(asked_max) or config.spec_type != "none"
    n_max = asked_max if asked_max is not None else config.spec_max
    return DraftLimits(n_max if on else 0, min(asked_min or 0, n_max))


def plan_choices(
    options: GenerationOptions,
    prompts: list[list[int]],
    inputs: PlanInputs,
    *,
    prompt_param: str,
    logprobs: int | None = None,
    grammar: str | None = None,
    grammar_triggers: tuple[str, ...] = (),
    thinking_budget: ThinkingBudget | None = None,
    vocabulary_size: int,
    prompt_logprobs: bool = False,
    media: tuple[MediaRun, ...] = (),
    prediction: tuple[int, ...] = (),
) -> list[ChoicePlan]:
    """One request per choice: `n` for each prompt, indexed prompt by prompt, as OpenAI orders them.

    With a seed, choice j of a prompt uses seed + j, so identical requests give identical choices.
    """
    n = options.n
    limit = inputs.config.max_n
    if n * len(prompts) > limit:
        raise InvalidRequestError(
            f"n is {n} for {len(prompts)} prompt(s): at most {limit} choices per request (LLM_MAX_N).",
            param="n",
        )
    bias = logit_bias(options.logit_bias, vocabulary_size)
    requests = []
    for position, tokens in enumerate(prompts):
        base = replace(
            plan(options, tokens, inputs, prompt_param=prompt_param),
            logit_bias=bias,
            logprobs=logprobs,
            grammar=grammar,
            grammar_triggers=grammar_triggers if grammar else (),
            thinking_budget=thinking_budget,
            prompt_logprobs=prompt_logprobs,
            media=media,
            prediction=prediction,
        )
        if media:  # a medium's chunk is many positions: llama-server shifts none either
            base = replace(base, shift=None)
        for j in range(n):
            seed = base.sampling.seed
            sampling = replace(base.sampling, seed=None if seed is None else seed + j)
            requests.append(replace(base, index=position * n + j, sampling=sampling))
    return requests


def logit_bias(raw: Mapping[str, float], vocabulary_size: int) -> dict[int, float]:
    """Token ids (JSON keys are strings) to a bias in [-100, 100], checked against the vocabulary."""
    bias = {}
    for key, value in raw.items():
        if not key.lstrip("-").isdigit() or not 0 <= int(key) < vocabulary_size:
            raise InvalidRequestError(
                f"logit_bias: {key!r} is not a token id of this model (0 to {vocabulary_size - 1}).",
                param="logit_bias",
            )
        bias[int(key)] = float(value)
    return bias
