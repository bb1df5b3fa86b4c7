"""A Responses request as the engine's requests: the prompt fitted, the grammar, the choices planned."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.api.generation.planning import plan_choices
from app.api.prompting import overflow, structured_output
from app.api.prompting.overflow import Fitted
from app.api.requests.chat import ChatRequest
from app.api.responses import conversion
from app.engine.engine import Engine
from app.engine.types import GenerationRequest


@dataclass(frozen=True)
class Planned:
    fitted: Fitted
    requests: list[GenerationRequest]

    @property
    def chat(self) -> ChatRequest:
        return self.fitted.chat

    @property
    def prompt_tokens(self) -> int:
        return len(self.fitted.prompt.tokens)


def plan(engine: Engine, body: dict[str, Any]) -> Planned:
    """`body` (its `input` the whole conversation) as what the engine generates."""
    fitted = overflow.fitted_prompt(engine.tokenizer, conversion.as_chat(body))
    chat, prompt = fitted.chat, fitted.prompt
    grammar, triggers, param = conversion.grammar(
        chat, (body.get("text") or {}).get("format"), prompt.profile
    )
    requests = plan_choices(
        chat,
        [prompt.tokens],
        prompt_param="input",
        logprobs=chat.top_logprobs if chat.logprobs else None,
        grammar=structured_output.checked(engine.tokenizer, grammar, param),
        grammar_triggers=triggers,
        vocabulary_size=engine.tokenizer.vocabulary_size,
        media=prompt.media,
    )
    return Planned(fitted, requests)
