"""Chat completions and text completions served: the request planned, generated, and presented as
OpenAI's objects or chunks (the views in routes.py parse; this turns a typed request into its answer)."""

from __future__ import annotations

from dataclasses import replace

from flask import Response

from app.api.chat.objects import ObjectHeader
from app.api.chat.presenter import CompletionOptions, CompletionPresenter
from app.api.generation.chat_job import plan_chat
from app.api.generation.loop import generate
from app.api.generation.planning import plan_choices
from app.api.generation.served import plan_inputs
from app.api.http.body import generating_engine
from app.api.http.errors import InvalidRequestError
from app.api.prompting import overflow, prompt_places, structured_output
from app.api.prompting.text_prompt import prompt_of
from app.api.requests.chat import ChatRequest
from app.api.requests.completion import CompletionRequest
from app.engine.tokenizer import Tokenizer
from app.settings.current import current_config


def chat_completion(chat: ChatRequest) -> Response:
    """The answer to a conversation, formatted by the model's own chat template: whole, or its chunks."""
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


def completion(completion: CompletionRequest) -> Response:
    """Each text prompt continued (or filled in the middle, given a `suffix`): whole, or its chunks."""
    engine = generating_engine()
    tokenizer = engine.tokenizer
    if completion.suffix and not tokenizer.supports_infill:
        raise InvalidRequestError(
            "suffix needs a model with fill-in-the-middle tokens; this one has none.", param="suffix"
        )
    prompts, texts = zip(
        *(prompt_of(tokenizer, item, completion.suffix) for item in completion.prompts), strict=True
    )
    plans = plan_choices(
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
    echoed = {r.index: texts[r.index // n] for r in plans} if completion.echo else {}
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
    return generate(engine, completion.stream, plans, presenter, options.prompt_tokens, key)


def answering_as(asked: str | None) -> str:
    """The `model` an answer names: a LoRA adapter the request named as its model (as vLLM's), else the
    model's id (an alias is answered as the id, as llama-server's)."""
    config = current_config()
    return asked if asked is not None and config.model.adapter_named(asked) is not None else config.model_id


def _prediction(tokenizer: Tokenizer, text: str | None) -> tuple[int, ...]:
    """A predicted output's tokens, as the answer would hold them (no BOS, no control tokens)."""
    return tuple(tokenizer.tokenize(text, add_special=False, parse_special=False)) if text else ()
