"""Transcriptions served: the clip checked against the model's projector, asked of the model as its
chat template hears audio, generated and presented in the format asked (routes.py reads the form)."""

from __future__ import annotations

from flask import Response

from app.api.audio import transcripts
from app.api.audio.presenter import TranscriptionFacts, TranscriptionPresenter
from app.api.audio.request import TranscriptionRequest
from app.api.generation.loop import generate
from app.api.generation.planning import plan_choices
from app.api.generation.served import plan_inputs
from app.api.http import media
from app.api.http.body import generating_engine
from app.api.http.errors import InvalidRequestError
from app.api.prompting import conversation
from app.api.requests.chat import ChatRequest
from app.engine.types import Sampling
from app.settings.current import current_config


def transcribed(asked: TranscriptionRequest) -> Response:
    """The clip's transcript (or its events), in the response format asked."""
    engine = generating_engine()
    tokenizer, config = engine.tokenizer, current_config()
    projector = tokenizer.projector
    if projector is None or not projector.capabilities.audio:
        raise InvalidRequestError(
            f"The model {config.model_id!r} does not take audio: serve it with an audio projector "
            '(LLM_MMPROJ, or "mmproj" in LLM_MODELS).',
            param="file",
        )
    try:
        seconds = media.audio_seconds(asked.clip, "file")  # the header read once: checked, and the duration
    except media.MediaError as exc:
        raise InvalidRequestError(f"file: the clip {exc}", param="file") from None
    chat = ChatRequest(
        model=asked.model,
        messages=transcripts.asr_messages(
            tokenizer.chat_template or "",
            asked.prompt,
            asked.language,
            media.marker("audio", asked.clip),
        ),
        max_tokens=asked.max_tokens,
        sampling=Sampling(temperature=asked.temperature),
        stream=asked.stream,
    )
    inputs = plan_inputs()
    prompt = conversation.prompt(tokenizer, chat, inputs.config)
    plans = plan_choices(
        chat,
        [prompt.tokens],
        inputs,
        prompt_param="file",
        logprobs=0 if asked.scored else None,
        vocabulary_size=tokenizer.vocabulary_size,
        media=prompt.media,
    )
    facts = TranscriptionFacts(
        response_format=asked.response_format,
        language=asked.language,
        duration=seconds,
        temperature=asked.temperature,
        prompt_tokens=len(prompt.tokens),
        audio_tokens=sum(run.length for run in prompt.media),
        logprobs=asked.logprobs,
        reader=prompt.reader,
    )
    return generate(engine, chat.stream, plans, TranscriptionPresenter(facts), len(prompt.tokens))
