"""The formats whose calls are JSON after a marker, each with its markers, keys and layout."""

from __future__ import annotations

from app.chat_formats.json_calls import JsonCallFormat, Keys

HERMES = JsonCallFormat("Hermes 2 Pro", "<tool_call>", "</tool_call>", newlines=True)
MISTRAL_NEMO = JsonCallFormat(
    "Mistral Nemo",
    "[TOOL_CALLS]",
    array=True,
    keys=Keys(id="id", layout='{"name": NAME, "arguments": ARGS, "id": ID9}'),
    thinking_tags=("[THINK]", "[/THINK]"),
)
GRANITE = JsonCallFormat("Granite", "<|tool_call|>", array=True, wrappers=("<response>", "</response>"))
COMMAND_R7B = JsonCallFormat(
    "Command R7B",
    "<|START_ACTION|>",
    "<|END_ACTION|>",
    array=True,
    keys=Keys(
        name="tool_name",
        arguments=("parameters",),
        id="tool_call_id",
        layout='{"tool_call_id": IDN, "tool_name": NAME, "parameters": ARGS}',
    ),
    wrappers=("<|START_RESPONSE|>", "<|END_RESPONSE|>"),
    thinking_tags=("<|START_THINKING|>", "<|END_THINKING|>"),
)
LLAMA_3 = JsonCallFormat(
    "Llama 3.x",
    "",
    keys=Keys(arguments=("parameters", "arguments"), layout='{"name": NAME, "parameters": ARGS}'),
    separator="; ",
    bare_prefix="<|python_tag|>",
)
GENERIC = JsonCallFormat("Generic", "", parallel_calls=False)
