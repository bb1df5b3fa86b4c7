"""A chat-shaped request made ready for the engine, the same way for every API family.

Chat completions, Anthropic's Messages, Ollama's chat and generate, the Responses API, and the
MCP loops of the last two each take their request to a `ChatRequest` and call `plan_chat`: the
conversation fitted to the context (its oldest turns dropped when it truncates), the room the
family leaves its answer (`bound`), the thinking budget, the grammar the answer follows (calls
in the model's own syntax, or the response format), and one engine request per choice. It reads
nothing but its arguments: the view read the rest once (`served.plan_inputs`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from app.api.generation.planning import PlanInputs, plan_choices
from app.api.prompting import conversation, overflow, structured_output
from app.api.prompting.conversation import ChatPrompt
from app.api.prompting.overflow import Fitted
from app.api.prompting.structured_output import AnswerGrammar
from app.api.requests.chat import ChatRequest
from app.engine.tokenizer import Tokenizer
from app.engine.types import ChoicePlan

# A family's rule for the room an answer gets once the prompt's size is known: the request as it
# then stands (Anthropic's: max_tokens cut to the window; Ollama's: num_predict to its num_ctx).
Bound = Callable[[ChatRequest, int], ChatRequest]


@dataclass(frozen=True)
class ChatJob:
    """The request as planned: the conversation as it fits, its prompt, the answer's grammar, the
    engine's plans (one per choice), and whether the family's bound cut the answer's room."""

    fitted: Fitted
    answer: AnswerGrammar
    plans: list[ChoicePlan]
    bounded: bool = False

    @property
    def chat(self) -> ChatRequest:
        return self.fitted.chat

    @property
    def prompt(self) -> ChatPrompt:
        return self.fitted.prompt

    @property
    def prompt_tokens(self) -> int:
        return len(self.fitted.prompt.tokens)


def plan_chat(
    tokenizer: Tokenizer,
    chat: ChatRequest,
    inputs: PlanInputs,
    *,
    prompt_param: str,
    fences: bool = False,
    window: int | None = None,
    bound: Bound | None = None,
    given: ChatPrompt | None = None,
    prediction: tuple[int, ...] = (),
) -> ChatJob:
    """Fit, bound, budget, grammar, plan. `fences`: llama-server's chat grammar for a JSON answer;
    `window`: a smaller context the request asked for; `given`: a prompt the family made itself
    (a raw or fill-in-the-middle one), taken as it is."""
    config = inputs.config
    fitted = (
        Fitted(chat, given) if given is not None else overflow.fitted_prompt(tokenizer, chat, config, window)
    )
    bounded = False
    if bound is not None:
        within = bound(fitted.chat, len(fitted.prompt.tokens))
        fitted, bounded = replace(fitted, chat=within), within != fitted.chat
    chat, prompt = fitted.chat, fitted.prompt
    answer = structured_output.answer_grammar(chat, prompt.profile, fences=fences)
    plans = plan_choices(
        chat,
        [prompt.tokens],
        inputs,
        prompt_param=prompt_param,
        logprobs=chat.top_logprobs if chat.logprobs else None,
        grammar=structured_output.checked(tokenizer, answer.gbnf, answer.param),
        grammar_triggers=answer.triggers,
        thinking_budget=conversation.thinking_budget(tokenizer, prompt, chat.reasoning_budget, config),
        vocabulary_size=tokenizer.vocabulary_size,
        media=prompt.media,
        prediction=prediction,
    )
    return ChatJob(fitted, answer, plans, bounded)
