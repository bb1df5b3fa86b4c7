"""`POST /v1/chat/completions`, `/v1/completions` and `/v1/chat/completions/input_tokens`."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify

from app.api.chat import openapi as doc
from app.api.chat import serving
from app.api.chat.schemas import chat_completion_schema, completion_schema
from app.api.generation.memory_view import memory_json, speculative_json
from app.api.http import media, shown
from app.api.http.body import generating_engine, loaded_engine, parse_request
from app.api.http.openapi import documented
from app.api.prompting import conversation
from app.api.requests.chat import ChatRequest
from app.api.requests.completion import CompletionRequest
from app.api.routing import waking
from app.api.routing.front import routed
from app.engine.multimodal.projector import capabilities_of
from app.settings.current import current_config

bp = Blueprint("chat", __name__)


@bp.post("/v1/chat/completions")
@documented(doc.CHAT_COMPLETION)
@routed(streams=True)
def create_chat_completion() -> Response:
    """Answer a conversation, formatted by the model's own chat template."""
    return serving.chat_completion(parse_request(chat_completion_schema, ChatRequest))


@bp.post("/v1/completions")
@documented(doc.COMPLETION)
@routed(streams=True)
def create_completion() -> Response:
    """Continue each text prompt (or fill in the middle, given a `suffix`)."""
    return serving.completion(parse_request(completion_schema, CompletionRequest))


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
@routed(use=None, source="query", wakes=False, loads=False)
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
        # The CPU variant a portable build (the image's) loaded for this CPU; null: one built in.
        "cpu_variant": getattr(engine, "cpu_variant", None),
        # What llama.cpp's load said of where the model went: layers on a GPU, MiB per device.
        "offload": placement.as_json() if (placement := getattr(engine, "placement", None)) else None,
        "speculative": speculative_json(memory, config.spec_type),
    }
    return answer
