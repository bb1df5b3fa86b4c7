"""The Responses API served: the stored turns read, the request planned and generated (or looped
over MCP tools, or run in the background), presented as a Response or its events and recorded;
compaction and token counts (the views in routes.py parse; this turns a typed request into its answer)."""

from __future__ import annotations

from dataclasses import replace

from flask import Response

from app.api.generation.chat_job import plan_chat
from app.api.generation.loop import generate
from app.api.generation.served import plan_inputs
from app.api.http import sealing, skipped_tools
from app.api.http.body import generating_engine
from app.api.http.errors import InvalidRequestError
from app.api.prompting import conversation, overflow, prompt_places
from app.api.responses import background, compaction, conversion, history, mcp_loop
from app.api.responses.objects import ResponseHeader
from app.api.responses.presenter import ResponsesPresenter
from app.api.responses.request import ResponseRequest
from app.api.responses.tool_kinds import kinds_of
from app.settings.current import current_config

# The `include` that asks for each reasoning item sealed, for a client that keeps nothing here.
ENCRYPTED_REASONING = "reasoning.encrypted_content"


def respond(asked: ResponseRequest) -> Response:
    """The Response answering the input items (after the stored turns they continue), or its events."""
    engine, inputs = generating_engine(), plan_inputs()
    kinds = kinds_of(asked.tools)
    skipped_tools.skip(kinds.skipped)
    before = history.history(asked)
    if any(tool["type"] == "mcp" for tool in asked.tools):
        return mcp_loop.respond(engine, asked, before, inputs)
    whole = replace(asked, input=(*before, *asked.input))
    chat = conversion.as_chat(whole)
    # The truncation in force, echoed on the response: as asked, else the server's policy.
    truncation = "auto" if overflow.truncates(chat, inputs.config) else "disabled"
    planned = plan_chat(engine.tokenizer, chat, inputs, prompt_param="input")
    chat, prompt = planned.chat, planned.prompt
    recorder = history.Recorder(asked)
    header = ResponseHeader(
        replace(asked, truncation=truncation), inputs.config.model_id, recorder.responses is not None,
        recorder.conversation,
    )  # fmt: skip
    sealed = sealing.current().seal if ENCRYPTED_REASONING in asked.include else None
    presenter = ResponsesPresenter(
        header,
        len(prompt.tokens),
        prompt.reader,
        on_final=recorder or None,
        wants_logprobs=chat.logprobs,
        kinds=kinds,
        sealed=sealed,
    )
    if asked.background:
        started = background.start(engine, asked.stream, planned.plans, presenter, recorder)
        return overflow.reported(started, planned.fitted)
    locate = prompt_places.locator(engine.tokenizer, chat, inputs.config)
    answer = generate(
        engine, chat.stream, planned.plans, presenter, len(prompt.tokens), chat.prompt_cache_key, locate
    )
    return overflow.reported(answer, planned.fitted)


def compacted(asked: ResponseRequest) -> Response:
    """The conversation shortened to its user messages and a sealed summary the served model writes."""
    engine = generating_engine()
    items = [*history.history(asked), *map(dict, asked.input)]
    if not items:
        raise InvalidRequestError("There is nothing to compact: input is empty.", param="input")
    summarising = conversion.as_chat(compaction.summarising(asked, items))
    planned = plan_chat(engine.tokenizer, summarising, plan_inputs(), prompt_param="input")
    prompt = planned.prompt
    presenter = compaction.CompactionPresenter(items, len(prompt.tokens), prompt.reader, sealing.current())
    return generate(engine, False, planned.plans, presenter, len(prompt.tokens))


def input_tokens(asked: ResponseRequest) -> int:
    """The tokens the input takes after the chat template, tools included (a continued one whole)."""
    whole = replace(asked, input=(*history.history(asked), *asked.input))  # a continued one counts whole
    prompt = conversation.prompt(generating_engine().tokenizer, conversion.as_chat(whole), current_config())
    return len(prompt.tokens)
