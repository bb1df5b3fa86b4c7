"""Ollama's chat and generate served: the prompt (the template's, raw, or filled in the middle) fitted
to the request's num_ctx, planned, generated and presented as Ollama's answer or its NDJSON stream."""

from __future__ import annotations

from flask import Response

from app.api.generation.chat_job import plan_chat
from app.api.generation.loop import generate
from app.api.generation.served import plan_inputs
from app.api.http import media
from app.api.http.body import generating_engine
from app.api.http.errors import InvalidRequestError
from app.api.ollama import conversion
from app.api.ollama.presenter import OllamaPresenter
from app.api.ollama.request import OllamaRequest
from app.api.prompting import conversation, overflow, prompt_places
from app.api.prompting.conversation import ChatPrompt
from app.chat_formats.answer import AnswerReader
from app.engine.media import MediaRun
from app.engine.tokenizer import Tokenizer
from app.settings.config import Config


def chat(asked: OllamaRequest) -> Response:
    """The answer to the conversation: a message (with thinking and tool calls), or its NDJSON stream."""
    engine, inputs = generating_engine(), plan_inputs()
    job = plan_chat(
        engine.tokenizer,
        asked.chat,
        inputs,
        prompt_param="messages",
        window=asked.num_ctx,
        bound=conversion.context_bound(asked.num_ctx, inputs.config),
    )
    chat, prompt = job.chat, job.prompt
    presenter = OllamaPresenter(
        asked.named, job.prompt_tokens, prompt.reader, chat=True, logprobs=chat.logprobs
    )
    locate = prompt_places.locator(engine.tokenizer, chat, inputs.config)
    answer = generate(engine, chat.stream, job.plans, presenter, job.prompt_tokens, locate=locate)
    return overflow.reported(answer, job.fitted)


def generated(asked: OllamaRequest) -> Response:
    """The prompt continued (through the chat template, or `raw`, or filled in before a `suffix`)."""
    engine, inputs = generating_engine(), plan_inputs()
    tokenizer, config = engine.tokenizer, inputs.config
    given = _prompt(tokenizer, asked, config)
    bound = conversion.context_bound(asked.num_ctx, config)
    job = plan_chat(tokenizer, asked.chat, inputs, prompt_param="prompt", given=given, bound=bound)
    presenter = OllamaPresenter(
        asked.named, job.prompt_tokens, job.prompt.reader, chat=False, logprobs=job.chat.logprobs
    )
    return generate(engine, job.chat.stream, job.plans, presenter, job.prompt_tokens)


def _prompt(tokenizer: Tokenizer, asked: OllamaRequest, config: Config) -> ChatPrompt:
    """Generate's prompt: filled in the middle (a suffix), the client's own (raw), else the template's."""
    profile = conversation.template_profile(tokenizer, config.chat_format)
    reader = AnswerReader(profile.format)
    if asked.suffix:
        if not tokenizer.supports_infill:
            raise InvalidRequestError(
                "suffix needs a model with fill-in-the-middle tokens; this one has none."
            )
        return ChatPrompt(asked.prompt, tokenizer.infill(asked.prompt, asked.suffix), reader, profile)
    if asked.raw:
        # As Ollama tokenizes every prompt: the model's BOS, and the special tokens in the text
        # parsed, so a prompt the client templated itself reads as the template's own.
        runs: tuple[MediaRun, ...] = ()
        if media.has_media(asked.prompt):
            tokens, runs = conversation.media_tokens(tokenizer, asked.prompt, config, "images")
        else:
            tokens = tokenizer.parsed(asked.prompt)
        return ChatPrompt(asked.prompt, tokens, reader, profile, runs)
    return conversation.prompt(tokenizer, asked.chat, config)  # the template's, never cut short
