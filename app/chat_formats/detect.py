"""Which format a chat template speaks, read from its text as llama.cpp does, or named in LLM_MODELS."""

from __future__ import annotations

from app.chat_formats.base import ChatFormat
from app.chat_formats.json_formats import COMMAND_R7B, GENERIC, GRANITE, HERMES, LLAMA_3, MISTRAL_NEMO
from app.chat_formats.recipient_calls import FunctionaryV32, GptOss
from app.chat_formats.tagged_calls import DeepSeekR1, DeepSeekV31, MistralArgs, Qwen3Coder

FORMATS: dict[str, ChatFormat] = {
    fmt.name: fmt
    for fmt in (
        GptOss(),
        FunctionaryV32(),
        COMMAND_R7B,
        DeepSeekR1(),
        DeepSeekV31(),
        MistralArgs(),
        MISTRAL_NEMO,
        Qwen3Coder(),
        HERMES,
        GRANITE,
        LLAMA_3,
        GENERIC,
    )
}

# Most specific first: Qwen3-Coder's templates also hold `<tool_call>`, Magistral's `[TOOL_CALLS]`.
_MARKERS: list[tuple[tuple[str, ...], str]] = [
    (("<|channel|>",), "GPT-OSS"),
    ((">>>all",), "Functionary v3.2"),
    (("<|START_ACTION|>",), "Command R7B"),
    (("<｜tool▁calls▁begin｜>", "```json"), "DeepSeek R1"),  # R1 and V3 fence the arguments
    (("<｜tool▁calls▁begin｜>",), "DeepSeek V3.1"),
    (("[TOOL_CALLS]", "[ARGS]"), "Magistral"),
    (("[TOOL_CALLS]",), "Mistral Nemo"),
    (("<tool_call>", "<function=", "<parameter="), "Qwen3-Coder XML"),
    (("<tool_call>",), "Hermes 2 Pro"),
    (("<|tool_call|>",), "Granite"),
    (("<|start_header_id|>", "ipython"), "Llama 3.x"),
]


def detect(template: str) -> ChatFormat:
    """The format whose markers the template writes; ours (Generic) when it writes none."""
    for markers, name in _MARKERS:
        if all(marker in template for marker in markers):
            return FORMATS[name]
    return GENERIC


def by_name(name: str) -> ChatFormat:
    """A format named in settings (case and spaces ignored); KeyError if there is none."""
    wanted = _key(name)
    for known, fmt in FORMATS.items():
        if _key(known) == wanted:
            return fmt
    raise KeyError(name)


def _key(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def thinks(template: str, fmt: ChatFormat) -> bool:
    """Whether the template knows its format's thinking tags (so the answer may start with them)."""
    return fmt.thinking_tags is not None and fmt.thinking_tags[0] in template
