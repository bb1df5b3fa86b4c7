"""`POST /v1/chat/completions`, `/v1/completions` and `/v1/chat/completions/input_tokens`."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request

from app.api.chat.llama_presenter import LlamaAnswer, LlamaPresenter
from app.api.chat.llama_schemas import llama_completion_schema
from app.api.chat.objects import Shape
from app.api.chat.presenter import AnswerOptions, CompletionPresenter
from app.api.chat.schemas import chat_completion_schema, completion_schema
from app.api.generation.loop import generate
from app.api.generation.memory_view import memory_json, speculative_json
from app.api.generation.planning import plan_choices
from app.api.http.body import generating_engine, loaded_engine, parse_body
from app.api.http.errors import InvalidRequestError
from app.api.prompting import conversation, structured_output
from app.api.routing.route import route_here_or_relay
from app.engine.tokenizer import Tokenizer
from app.settings.current import current_config

bp = Blueprint("chat", __name__)


@bp.post("/v1/chat/completions")
def create_chat_completion() -> Response:
    """Answer a conversation, formatted by the model's own chat template."""
    body = parse_body(chat_completion_schema)
    if (relayed := route_here_or_relay(body.get("model"), streams=body.get("stream"))) is not None:
        return relayed
    engine = generating_engine()
    prompt = conversation.prompt(engine.tokenizer, body["messages"], body)
    grammar, triggers, param = structured_output.answer_grammar(body, prompt.profile)
    requests = plan_choices(
        body,
        [prompt.tokens],
        prompt_param="messages",
        max_param="max_completion_tokens",
        logprobs=(body.get("top_logprobs") or 0) if body.get("logprobs") else None,
        grammar=structured_output.checked(engine.tokenizer, grammar, param),
        grammar_triggers=triggers,
        thinking_budget=conversation.thinking_budget(engine.tokenizer, prompt, body.get("reasoning_budget")),
        vocabulary_size=engine.tokenizer.vocabulary_size,
    )
    options = AnswerOptions(
        chat=True,
        prompt_tokens=len(prompt.tokens),
        include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
        reader=prompt.reader,
        choices_per_prompt=body.get("n") or 1,
    )
    shape = Shape(current_config().model_id, chat=True, fingerprint=engine.fingerprint)
    presenter = CompletionPresenter(shape, options, wants_logprobs=bool(body.get("logprobs")))
    return generate(engine, body, requests, presenter, options.prompt_tokens)


@bp.post("/v1/completions")
def create_completion() -> Response:
    """Continue each text prompt (or fill in the middle, given a `suffix`)."""
    body = parse_body(completion_schema)
    if (relayed := route_here_or_relay(body.get("model"), streams=body.get("stream"))) is not None:
        return relayed
    engine = generating_engine()
    tokenizer = engine.tokenizer
    if body.get("suffix") and not tokenizer.supports_infill:
        raise InvalidRequestError(
            "suffix needs a model with fill-in-the-middle tokens; this one has none.", param="suffix"
        )
    prompts, texts = zip(
        *(_prompt(tokenizer, item, body.get("suffix")) for item in body["prompt"]), strict=True
    )
    scoring = bool(body.get("echo")) and body.get("logprobs") is not None
    requests = plan_choices(
        body,
        list(prompts),
        prompt_param="prompt",
        logprobs=body.get("logprobs"),
        vocabulary_size=tokenizer.vocabulary_size,
        prompt_logprobs=scoring,
    )
    n = body.get("n") or 1
    echoed = {r.index: texts[r.index // n] for r in requests} if body.get("echo") else {}
    options = AnswerOptions(
        chat=False,
        prompt_tokens=sum(len(tokens) for tokens in prompts),
        prefixes=echoed,
        include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
        choices_per_prompt=n,
    )
    shape = Shape(current_config().model_id, chat=False, fingerprint=engine.fingerprint)
    presenter = CompletionPresenter(shape, options, wants_logprobs=body.get("logprobs") is not None)
    return generate(engine, body, requests, presenter, options.prompt_tokens)


@bp.post("/completion")
@bp.post("/completions")
def create_llama_completion() -> Response:
    """llama-server's own completion: one prompt continued, with `n_probs` token probabilities."""
    body = parse_body(llama_completion_schema)
    if (relayed := route_here_or_relay(body.get("model"), streams=body.get("stream"))) is not None:
        return relayed
    engine = generating_engine()
    prompt = body["prompt"]
    if isinstance(prompt, str):  # as llama-server tokenizes it here: BOS, control tokens parsed
        tokens, text = engine.tokenizer.parsed(prompt), prompt
    else:
        tokens, text = _prompt(engine.tokenizer, prompt, None)
    if body.get("n_predict") is not None:  # llama-server's name wins over max_tokens; -1: up to the context
        body["max_tokens"] = None
        if body["n_predict"] < 0:
            del body["n_predict"]
    n_probs, return_tokens = body.get("n_probs") or 0, bool(body.get("return_tokens"))
    (request_,) = plan_choices(
        {**body, "n": 1},
        [tokens],
        prompt_param="prompt",
        max_param="n_predict",  # when not given, plan() names max_tokens
        logprobs=n_probs if n_probs or return_tokens else None,
        vocabulary_size=engine.tokenizer.vocabulary_size,
    )
    settings = {"n_predict": request_.max_tokens, "seed": body.get("seed"), "n_probs": n_probs,
                "temperature": request_.sampling.temperature, "stream": bool(body.get("stream"))}  # fmt: skip
    answer = LlamaAnswer(current_config().model_id, text, len(tokens), n_probs, return_tokens, settings)
    return generate(engine, body, [request_], LlamaPresenter(answer), len(tokens))


@bp.post("/v1/chat/completions/input_tokens")
def count_input_tokens() -> Response:
    """How many tokens a chat request's prompt takes after the chat template (tools included)."""
    body = parse_body(chat_completion_schema)
    if (relayed := route_here_or_relay(body.get("model"), streams=body.get("stream"))) is not None:
        return relayed
    prompt = conversation.prompt(generating_engine().tokenizer, body["messages"], body)
    return jsonify({"object": "chat.completion.input_tokens", "input_tokens": len(prompt.tokens)})


@bp.post("/apply-template")
def apply_template() -> Response:
    """The prompt a chat request makes after the chat template, tools included (llama-server's route)."""
    body = parse_body(chat_completion_schema)
    if (relayed := route_here_or_relay(body.get("model"), streams=body.get("stream"))) is not None:
        return relayed
    prompt = conversation.prompt(generating_engine().tokenizer, body["messages"], body)
    return jsonify({"prompt": prompt.text})


@bp.get("/props")
def properties() -> Response:
    """The model's settings and chat template, and what the template can do (llama-server's shape)."""
    if (relayed := route_here_or_relay(request.args.get("model"), None)) is not None:
        return relayed
    config, engine = current_config(), loaded_engine()
    tokenizer = engine.tokenizer
    profile = conversation.template_profile(tokenizer, config.chat_format)
    memory = getattr(engine, "memory_kind", None)  # none for an embedding model
    return jsonify(
        {
            "model_alias": config.model_id,
            "model_path": config.model_path,
            "total_slots": config.parallel,
            "default_generation_settings": {"n_ctx": config.n_ctx},
            "chat_template": tokenizer.chat_template,
            "chat_template_caps": profile.caps(),
            "chat_format": profile.format.name if profile.native_tools else "Generic",
            "bos_token": tokenizer.bos_text,
            "eos_token": tokenizer.eos_text,
            "modalities": {"vision": False, "audio": False},
            "is_sleeping": False,
            "memory": memory_json(memory, config.ctx_checkpoints) if memory is not None else None,
            "batch_invariant": bool(getattr(engine, "batch_invariant", False)),
            "speculative": speculative_json(memory, config.spec_type),
        }
    )


def _prompt(tokenizer: Tokenizer, item: str | list[int], suffix: str | None) -> tuple[list[int], str]:
    """A prompt's tokens and text: from text (filled in the middle, given a suffix) or from token ids."""
    if isinstance(item, str):
        return (tokenizer.infill(item, suffix) if suffix else tokenizer.text(item)), item
    if suffix:
        raise InvalidRequestError("suffix needs text prompts, not token ids.", param="suffix")
    if not tokenizer.in_vocabulary(item):
        raise InvalidRequestError(
            f"prompt: every token id must be from 0 to {tokenizer.vocabulary_size - 1}.", param="prompt"
        )
    return item, tokenizer.detokenize(item)
