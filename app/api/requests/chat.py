"""A chat request, typed: what chat completions send, and what Anthropic's, Ollama's and Responses' become.

The messages and tools stay JSON-shaped: they are what the chat template reads (the
JSON edge); everything the server decides on is a typed field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.api.requests.generation import GenerationOptions, generation_fields

# `tool_choice`: "auto", "none", "required", or one function by name ({"name": ...}).
ToolChoice = str | Mapping[str, Any] | None


@dataclass(frozen=True)
class ClearThinking:
    """Drop the reasoning of earlier assistant turns, all but the last `keep_turns` with any
    (None: keep all)."""

    keep_turns: int | None = 1


@dataclass(frozen=True)
class ClearToolUses:
    """Once the prompt reaches `trigger_tokens` (or the conversation `trigger_uses` tool calls),
    replace the results of the oldest calls with a placeholder, all but the last `keep_uses`;
    nothing unless at least `clear_at_least` tokens go. `clear_inputs`: the calls' arguments too
    (True: every tool's; else these tools')."""

    trigger_tokens: int | None = 100_000
    trigger_uses: int | None = None
    keep_uses: int = 3
    clear_at_least: int = 0
    exclude: frozenset[str] = frozenset()
    clear_inputs: bool | frozenset[str] = False


ContextEdit = ClearThinking | ClearToolUses


@dataclass(frozen=True, kw_only=True)
class ChatRequest(GenerationOptions):
    """A conversation to answer, with its tools, output format and reasoning settings."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)  # OpenAI's {"type": "function", "function"}
    tool_choice: ToolChoice = None
    # Tools loaded mid-conversation (a tool search's references, Anthropic's tool_addition): callable,
    # described in the turn that loaded them rather than in the template's list, which stays as it
    # was so that the cached prompt stays valid; and the names withdrawn since (tool_removal).
    late_tools: list[dict[str, Any]] = field(default_factory=list)
    withdrawn_tools: frozenset[str] = frozenset()
    parallel_tool_calls: bool | None = None
    response_format: Mapping[str, Any] | None = None  # {"type": "text" | "json_object" | "json_schema", ...}
    # Where the family's request holds the answer's format, and its JSON schema, for errors to name
    # (Responses' text.format, Anthropic's output_config.format, Ollama's format).
    format_params: tuple[str, str] = ("response_format", "response_format.json_schema.schema")
    chat_template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    reasoning_format: str = "auto"  # "none": reasoning left in the content
    reasoning_budget: int | None = None
    reasoning_effort: str | None = None
    reasoning_shown: bool = True  # False: handed back sealed only (Anthropic's display: omitted)
    logprobs: bool = False
    top_logprobs: int = 0
    # vLLM's and llama-server's: continue the last (assistant) message, explicitly (None: the
    # server's LLM_PREFILL_ASSISTANT decides for a trailing assistant message); open the
    # assistant's turn after the messages or not (None: as the continuation needs).
    continue_final_message: bool | None = None
    add_generation_prompt: bool | None = None
    # The Responses API's: "auto" drops the oldest turns that do not fit the context, "disabled"
    # refuses such a request; None: LLM_CONTEXT_OVERFLOW decides.
    truncation: str | None = None
    # What to clear from earlier turns before the prompt is made (Anthropic's context_management).
    context_edits: tuple[ContextEdit, ...] = ()

    @property
    def tools_in_force(self) -> list[dict[str, Any]]:
        """The tools the model may call now: those listed and those loaded since, less the withdrawn."""
        every = [*self.tools, *self.late_tools]
        if not self.withdrawn_tools:
            return every
        return [t for t in every if t["function"]["name"] not in self.withdrawn_tools]

    @property
    def tools_active(self) -> bool:
        """Whether the model may call tools: some are in force, and tool_choice is not "none"."""
        return bool(self.tools_in_force) and self.tool_choice != "none"

    @property
    def tools_forced(self) -> bool:
        """Whether the answer must be calls: tool_choice "required" or a named function."""
        return self.tools_active and (self.tool_choice == "required" or isinstance(self.tool_choice, Mapping))

    @property
    def parallel_calls(self) -> bool:
        """Whether the answer may make several calls (OpenAI's default: yes)."""
        return self.parallel_tool_calls is not False


def chat_request(loaded: Mapping[str, Any]) -> ChatRequest:
    """The typed request from chat completions' loaded body (`max_completion_tokens` wins, as OpenAI's)."""
    options = generation_fields(loaded)
    if loaded.get("max_completion_tokens") is not None:
        options["max_tokens"], options["max_param"] = loaded["max_completion_tokens"], "max_completion_tokens"
    return ChatRequest(
        **options,
        messages=loaded["messages"],
        tools=loaded.get("tools") or [],
        tool_choice=loaded.get("tool_choice"),
        parallel_tool_calls=loaded.get("parallel_tool_calls"),
        response_format=loaded.get("response_format"),
        chat_template_kwargs=loaded.get("chat_template_kwargs") or {},
        reasoning_format=loaded.get("reasoning_format") or "auto",
        reasoning_budget=loaded.get("reasoning_budget"),
        reasoning_effort=loaded.get("reasoning_effort"),
        logprobs=bool(loaded.get("logprobs")),
        top_logprobs=loaded.get("top_logprobs") or 0,
        continue_final_message=loaded.get("continue_final_message"),
        add_generation_prompt=loaded.get("add_generation_prompt"),
        truncation=loaded.get("truncation"),
    )
