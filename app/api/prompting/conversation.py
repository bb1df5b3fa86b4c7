"""A conversation as the model reads it: its template given the tools, or our instruction if it has none."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.api.http import media
from app.api.http.errors import InvalidRequestError
from app.api.prompting import prefill, system_turns, tools
from app.api.requests.chat import ChatRequest
from app.chat_formats.answer import AnswerReader
from app.chat_formats.detect import by_name
from app.chat_formats.profile import TemplateProfile, profile
from app.engine.media import MediaRun
from app.engine.multimodal.projector import MediaLimits
from app.engine.tokenizer import Tokenizer
from app.engine.types import ThinkingBudget
from app.settings.config import Config

_INSTRUCTION = (
    "You can call these functions. To call one, answer with only a JSON object "
    '{{"name": <function name>, "arguments": <arguments object>}}.\n{functions}'
)
_profiles: dict[tuple[str, str | None], TemplateProfile] = {}


@dataclass
class ChatPrompt:
    """A templated conversation: its text and tokens, and how to read the answer to it."""

    text: str
    tokens: list[int]
    reader: AnswerReader
    profile: TemplateProfile
    media: tuple[MediaRun, ...] = ()  # images and audio among the tokens


def template_profile(tokenizer: Tokenizer, named_format: str | None = None) -> TemplateProfile:
    """The model's template format and capabilities, probed once per template."""
    key = (tokenizer.chat_template, named_format)
    if key not in _profiles:
        found = _profiles[key] = profile(tokenizer.chat_template, tokenizer.render, named_format)
        if found.native_tools or found.thinks:
            tokenizer.preserve(found.format.markers)
    return _profiles[key]


def prompt(tokenizer: Tokenizer, chat: ChatRequest, config: Config) -> ChatPrompt:
    """Template `chat`'s messages with its tools and template variables."""
    shape = template_profile(tokenizer, config.chat_format)
    text = rendered(tokenizer, chat, config)
    fmt = shape.format if shape.native_tools else by_name("Generic")
    thinking = shape.thinks and chat.reasoning_format != "none"
    tags = fmt.thinking_tags
    opened = tags is not None and text.rstrip().endswith(tags[0])  # the template opened the thinking
    reader = AnswerReader(
        fmt,
        tools.functions(chat),
        thinking,
        opened,
        chat.parallel_calls,
        chat.tools_forced,
        inline_reasoning=chat.reasoning_format == "deepseek-legacy",
    )
    if not media.has_media(text):
        return ChatPrompt(text, tokenizer.chat_tokens(text), reader, shape)
    tokens, runs = media_tokens(tokenizer, text, config)
    return ChatPrompt(media.shown(text), tokens, reader, shape, runs)


def rendered(tokenizer: Tokenizer, chat: ChatRequest, config: Config) -> str:
    """The prompt text the template makes of `chat`, not yet tokens (an agent's 12k-token prompt takes
    the tokenizer a tenth of a second, which a caller that needs only the text does not pay)."""
    shape = template_profile(tokenizer, config.chat_format)
    # As llama-server: thinking on unless the request turns it off (templates such as
    # DeepSeek R1's test `not enable_thinking`, which an unset variable would pass), today's
    # date for templates that print it, and the request's own variables over both.
    variables = {**template_dates(datetime.now()), "enable_thinking": True, **chat.chat_template_kwargs}
    if chat.reasoning_effort is not None:
        variables.setdefault("reasoning_effort", chat.reasoning_effort)
    turns = prefill.continuation(chat, config.prefill_assistant)
    messages, opened_turn = turns.messages, turns.generation_prompt
    messages = system_turns.placed(messages, shape.supports_late_system)
    if shape.native_tools:
        if not shape.supports_tool_calls:  # it describes tools but drops earlier calls
            messages = with_calls_as_text(messages)
        text = tokenizer.render(
            _native(messages, shape),
            tools.rendered(chat.tools) if chat.tools_active else None,
            variables,
            opened_turn,
        )
    else:
        messages = with_calls_as_text(messages)
        if chat.tools_active and chat.tools:
            messages = with_tool_instructions(messages, chat.tools)
        text = tokenizer.render(messages, None, variables, opened_turn)
    fmt = shape.format if shape.native_tools else by_name("Generic")
    if turns.continued is not None:
        text = prefill.continued_text(text, turns.continued, fmt.thinking_tags if shape.thinks else None)
    return text


def media_tokens(
    tokenizer: Tokenizer, text: str, config: Config, param: str = "messages"
) -> tuple[list[int], tuple[MediaRun, ...]]:
    """A rendered prompt with media as tokens and media runs, through the model's projector; media a
    text-only model cannot read, or a kind its projector does not take, are the client's error."""
    cut, found, kinds = media.extract(text)
    projector = tokenizer.projector
    model = config.model_id
    if len(found) > config.max_media_parts:
        raise InvalidRequestError(
            f"The prompt holds {len(found)} images and audio clips; this server takes at most "
            f"{config.max_media_parts} in one (LLM_MAX_MEDIA_PARTS).",
            param=param,
        )
    if projector is None:
        raise InvalidRequestError(
            f"The model {model!r} reads text only: it cannot take the {kinds[0]} in this request "
            '(serve it with a multimodal projector: LLM_MMPROJ, or "mmproj" in LLM_MODELS).',
            param=param,
        )
    able = {"image": projector.capabilities.vision, "audio": projector.capabilities.audio}
    for kind in kinds:
        if not able[kind]:
            raise InvalidRequestError(
                f"The model {model!r} cannot take {kind}: its projector reads "
                f"{'images' if able['image'] else 'audio'} only.",
                param=param,
            )
    limits = MediaLimits(config.max_image_pixels, config.max_audio_seconds)
    return projector.prompt(tokenizer.chat_text(cut), list(zip(kinds, found, strict=True)), limits)


def template_dates(now: datetime) -> dict[str, str]:
    """llama-server's date variables (common/chat.cpp, common_chat_extra_context), in local time:
    Llama 3.x templates print a fixed date without `date_string`, firefunction-v2's fails without
    `datetime`."""
    return {"date_string": now.strftime("%d %b %Y"), "datetime": now.strftime("%b %d %Y")}


def thinking_budget(
    tokenizer: Tokenizer, prompt: ChatPrompt, tokens: int | None, config: Config
) -> ThinkingBudget | None:
    """The engine's budget for `tokens` of thinking, or LLM_REASONING_BUDGET's when the request sets
    none (None: unlimited, or a model that does not think)."""
    reader = prompt.reader
    if tokens is None:
        tokens = config.reasoning_budget
    if tokens < 0 or not reader.thinking or not reader.format.thinking_tags:
        return None
    opening, closing = reader.format.thinking_tags
    ending = tuple(tokenizer.tokenize(closing + "\n\n", add_special=False, parse_special=True))
    return ThinkingBudget(tokens, opening, closing, ending, reader.opened)


def _native(messages: list[dict[str, Any]], shape: TemplateProfile) -> list[dict[str, Any]]:
    """Messages as tool-aware templates read them: arguments as objects where the template writes
    them with tojson, and each tool result named after the call it answers."""
    names: dict[str, str] = {}
    converted = []
    for message in messages:
        if message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                names[call["id"]] = call["function"]["name"]
                arguments = call["function"].get("arguments")
                if shape.supports_object_arguments:
                    arguments = _loaded(arguments)
                elif not isinstance(arguments, str):
                    arguments = json.dumps(arguments)
                calls.append({**call, "function": {**call["function"], "arguments": arguments}})
            message = {**message, "tool_calls": calls}
        if message["role"] == "tool" and not message.get("name") and message.get("tool_call_id") in names:
            message = {**message, "name": names[message["tool_call_id"]]}
        converted.append(message)
    return converted


def with_tool_instructions(
    messages: list[dict[str, Any]], tool_list: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The conversation with the functions described in its system message (templates without tools)."""
    functions = "\n".join(json.dumps(tool["function"]) for tool in tool_list)
    instruction = _INSTRUCTION.format(functions=functions)
    if messages and messages[0]["role"] in ("system", "developer"):
        first = {**messages[0], "content": f"{messages[0]['content']}\n\n{instruction}"}
        return [first, *messages[1:]]
    return [{"role": "system", "content": instruction}, *messages]


def with_calls_as_text(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Earlier assistant calls written into their turns' content, as our instruction asked for them:
    templates without tools drop `tool_calls`, and the model would see an empty turn."""
    return [
        {**m, "content": "\n".join(_call_text(call) for call in m["tool_calls"])}
        if m.get("tool_calls") and not m.get("content")
        else m
        for m in messages
    ]


def _call_text(call: dict[str, Any]) -> str:
    return json.dumps(
        {"name": call["function"]["name"], "arguments": _loaded(call["function"].get("arguments"))}
    )


def _loaded(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments
