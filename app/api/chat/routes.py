"""`POST /v1/chat/completions`, `/v1/completions` and `/v1/chat/completions/input_tokens`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from flask import Blueprint, Response, jsonify

from app.api.chat import openapi as doc
from app.api.chat.objects import ObjectHeader
from app.api.chat.presenter import CompletionOptions, CompletionPresenter
from app.api.chat.schemas import chat_completion_schema, completion_schema
from app.api.generation.chat_job import plan_chat
from app.api.generation.loop import generate
from app.api.generation.memory_view import memory_json, speculative_json
from app.api.generation.planning import plan_choices
from app.api.generation.served import plan_inputs
from app.api.http import media, shown
from app.api.http.body import generating_engine, loaded_engine, parse_request
from app.api.http.errors import InvalidRequestError
from app.api.http.openapi import documented
from app.api.prompting import conversation, overflow, prompt_places, structured_output
from app.api.prompting.text_prompt import prompt_of
from app.api.requests.chat import ChatRequest
from app.api.requests.completion import CompletionRequest
from app.api.routing import waking
from app.api.routing.front import routed
from app.engine.multimodal.projector import capabilities_of
from app.engine.tokenizer import Tokenizer
from app.settings.current import current_config

bp = Blueprint("chat", __name__)


@bp.post("/v1/chat/completions")
@documented(doc.CHAT_COMPLETION)
@routed(streams=True)
def create_chat_completion() -> Response:
    """Answer a conversation, formatted by the model's own chat template."""
    chat = parse_request(chat_completion_schema, ChatRequest)
    engine, inputs = generating_engine(), plan_inputs()
    predicted = _prediction(engine.tokenizer, chat.prediction)
    # A JSON answer as llama-server's chat takes one: bare or ```json fenced, its content the JSON.
    job = plan_chat(
        engine.tokenizer, chat, inputs, prompt_param="messages", fences=True, prediction=predicted
    )
    chat, prompt = job.chat, job.prompt
    options = CompletionOptions(
        chat=True,
        prompt_tokens=job.prompt_tokens,
        prediction_tokens=len(predicted),
        include_usage=chat.include_usage,
        reader=replace(prompt.reader, json_answer=True) if job.answer.fenced_json else prompt.reader,
        choices_per_prompt=chat.n,
        timings_per_token=chat.timings_per_token,
    )
    header = ObjectHeader(answering_as(chat.model), chat=True, fingerprint=engine.fingerprint)
    presenter = CompletionPresenter(header, options, wants_logprobs=chat.logprobs)
    locate = prompt_places.locator(engine.tokenizer, chat, inputs.config)
    reply = generate(
        engine, chat.stream, job.plans, presenter, job.prompt_tokens, chat.prompt_cache_key, locate
    )
    return overflow.reported(reply, job.fitted)


@bp.post("/v1/completions")
@documented(doc.COMPLETION)
@routed(streams=True)
def create_completion() -> Response:
    """Continue each text prompt (or fill in the middle, given a `suffix`)."""
    completion = parse_request(completion_schema, CompletionRequest)
    engine = generating_engine()
    tokenizer = engine.tokenizer
    if completion.suffix and not tokenizer.supports_infill:
        raise InvalidRequestError(
            "suffix needs a model with fill-in-the-middle tokens; this one has none.", param="suffix"
        )
    prompts, texts = zip(
        *(prompt_of(tokenizer, item, completion.suffix) for item in completion.prompts), strict=True
    )
    requests = plan_choices(
        completion,
        list(prompts),
        plan_inputs(),
        prompt_param="prompt",
        logprobs=completion.logprobs,
        grammar=structured_output.llama_grammar(tokenizer, completion.constraint),
        vocabulary_size=tokenizer.vocabulary_size,
        prompt_logprobs=completion.scoring,
        prediction=(predicted := _prediction(tokenizer, completion.prediction)),
    )
    n = completion.n
    echoed = {r.index: texts[r.index // n] for r in requests} if completion.echo else {}
    options = CompletionOptions(
        chat=False,
        prompt_tokens=sum(len(tokens) for tokens in prompts),
        prefixes=echoed,
        prediction_tokens=len(predicted),
        include_usage=completion.include_usage,
        choices_per_prompt=n,
        timings_per_token=completion.timings_per_token,
    )
    header = ObjectHeader(answering_as(completion.model), chat=False, fingerprint=engine.fingerprint)
    presenter = CompletionPresenter(header, options, wants_logprobs=completion.logprobs is not None)
    key = completion.prompt_cache_key
    return generate(engine, completion.stream, requests, presenter, options.prompt_tokens, key)


@bp.post("/v1/chat/completions/input_tokens")
@documented(doc.INPUT_TOKEN_COUNT)
@routed()
def count_input_tokens() -> Response:
    """How many tokens a chat request's prompt takes after the chat template (tools included)."""
    chat = parse_request(chat_completion_schema, ChatRequest)
    prompt = conversation.prompt(generating_engine().tokenizer, chat, current_config())
    return jsonify({"object": "chat.completion.input_tokens", "input_tokens": len(prompt.tokens)})


@bp.post("/apply-template")
@documented(doc.APPLY_TEMPLATE)
@routed()
def apply_template() -> Response:
    """The prompt a chat request makes after the chat template, tools included (llama-server's route)."""
    chat = parse_request(chat_completion_schema, ChatRequest)
    prompt = conversation.prompt(generating_engine().tokenizer, chat, current_config())
    return jsonify({"prompt": prompt.text})


@bp.get("/props")
@documented(doc.PROPS)
@routed(use=None, source="query", wakes=False)
def properties() -> Response:
    """The model's settings and chat template, and what the template can do (llama-server's shape)."""
    # As llama-server's: asked of a sleeping model, what it said before falling asleep.
    mine = waking.sleeper()
    if mine is not None and mine.asleep and "props" in mine.answers:
        return jsonify({**mine.answers["props"], "is_sleeping": True})
    if (relayed := waking.awake_here(streams=False)) is not None:
        return relayed
    return jsonify(props_answer())


def props_answer() -> dict[str, Any]:
    """/props of this worker's model, loaded (also kept by a sleeping worker: app/serving/sleep.py)."""
    config, engine = current_config(), loaded_engine()
    tokenizer = engine.tokenizer
    profile = conversation.template_profile(tokenizer, config.chat_format)
    memory = getattr(engine, "memory_kind", None)  # none for an embedding model
    projector = tokenizer.projector
    modalities = projector.capabilities if projector is not None else capabilities_of(None)
    answer = {
        "model_alias": config.model_id,
        "model_path": shown.file_path(config.model_path),
        "total_slots": config.parallel,
        "default_generation_settings": {"n_ctx": config.n_ctx},
        "chat_template": tokenizer.chat_template,
        "chat_template_caps": profile.caps(),
        "chat_format": profile.format.name if profile.native_tools else "Generic",
        "bos_token": tokenizer.bos_text,
        "eos_token": tokenizer.eos_text,
        "modalities": modalities.as_json(),
        "audio_sample_rate": modalities.audio_sample_rate,
        # Where /completion's multimodal prompt_string puts each medium (llama-server's key).
        "media_marker": media.SHOWN,
        "is_sleeping": False,
        "memory": memory_json(memory, config.ctx_checkpoints) if memory is not None else None,
        "batch_invariant": bool(getattr(engine, "batch_invariant", False)),
        "speculative": speculative_json(memory, config.spec_type),
    }
    return answer


def answering_as(asked: str | None) -> str:
    """The `model` an answer names: a LoRA adapter the request named as its model (as vLLM's), else the
    model's id (an alias is answered as the id, as llama-server's)."""
    config = current_config()
    return asked if asked is not None and config.model.adapter_named(asked) is not None else config.model_id


def _prediction(tokenizer: Tokenizer, text: str | None) -> tuple[int, ...]:
    """A predicted output's tokens, as the answer would hold them (no BOS, no control tokens)."""
    return tuple(tokenizer.tokenize(text, add_special=False, parse_special=False)) if text else ()
