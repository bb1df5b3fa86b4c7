"""The one chat job every family runs: fit, bound, budget, grammar, plan, from its arguments alone."""

from __future__ import annotations

from dataclasses import replace
from typing import cast

import pytest

from app.api.generation.chat_job import plan_chat
from app.api.generation.planning import PlanInputs
from app.api.http.errors import ContextLengthError
from app.api.requests.chat import ChatRequest, chat_request
from app.engine.tokenizer import Tokenizer
from app.engine.types import Sampling
from tests.unit.conftest import FakeTokenizer, make_config

# One token per word; the tokenizer's protocol as planning uses it (the real one needs a model).
TOKENIZER = cast(Tokenizer, FakeTokenizer())
INPUTS = PlanInputs(make_config(), memory=None, key_name=None, priority_header=None)  # LLM_N_CTX=64
WORDS = "one two three four five six seven eight nine ten"


def conversation(turns: int, **fields: object) -> ChatRequest:
    """`turns` user turns of ten words, each answered, the last one open."""
    messages: list[dict[str, object]] = []
    for turn in range(turns):
        messages.append({"role": "user", "content": f"{turn} {WORDS}"})
        if turn < turns - 1:
            messages.append({"role": "assistant", "content": "ok"})
    return chat_request({"messages": messages, **fields})


def test_a_job_is_one_request_per_choice_with_its_grammar_and_needs_no_app() -> None:
    chat = conversation(1, n=3, seed=7, response_format={"type": "json_object"}, max_tokens=5)
    job = plan_chat(TOKENIZER, chat, INPUTS, prompt_param="messages")
    assert [r.index for r in job.plans] == [0, 1, 2]
    assert [r.sampling.seed for r in job.plans] == [7, 8, 9]
    assert all(r.grammar and r.prompt_tokens == job.prompt.tokens for r in job.plans)
    assert job.answer.param == "response_format" and job.prompt_tokens == len(job.prompt.tokens)
    assert not job.bounded and job.fitted.dropped_messages == 0


def test_a_conversation_too_long_drops_its_oldest_turns_when_it_truncates() -> None:
    long = conversation(6, max_tokens=8)
    with pytest.raises(ContextLengthError):
        plan_chat(TOKENIZER, long, INPUTS, prompt_param="messages")
    job = plan_chat(TOKENIZER, replace(long, truncation="auto"), INPUTS, prompt_param="messages")
    assert job.fitted.dropped_messages > 0 and job.prompt_tokens + 8 <= 64
    assert job.chat.messages[-1] == long.messages[-1]


def test_a_family_bound_shapes_the_answer_room_once_the_prompt_is_known() -> None:
    seen: list[int] = []

    def bound(chat: ChatRequest, prompt_tokens: int) -> ChatRequest:
        seen.append(prompt_tokens)
        return replace(chat, max_tokens=64 - prompt_tokens)  # Anthropic's: cut to the window

    job = plan_chat(TOKENIZER, conversation(1, max_tokens=500), INPUTS, prompt_param="messages", bound=bound)
    assert seen == [job.prompt_tokens] and job.bounded
    assert job.plans[0].max_tokens == 64 - job.prompt_tokens
    unbound = plan_chat(TOKENIZER, conversation(1, max_tokens=5), INPUTS, prompt_param="messages",
                        bound=lambda chat, _: chat)  # fmt: skip
    assert not unbound.bounded


def test_a_prompt_the_family_made_is_taken_as_it_is() -> None:
    made = plan_chat(TOKENIZER, conversation(1), INPUTS, prompt_param="messages").prompt
    given = replace(made, tokens=[5, 6, 7])
    job = plan_chat(TOKENIZER, conversation(1, temperature=0.0), INPUTS, prompt_param="prompt", given=given)
    assert job.plans[0].prompt_tokens == [5, 6, 7] and job.prompt is given
    assert job.plans[0].sampling == Sampling(temperature=0.0)


def test_predicted_tokens_reach_every_choice() -> None:
    job = plan_chat(TOKENIZER, conversation(1, n=2), INPUTS, prompt_param="messages", prediction=(4, 2))
    assert [r.prediction for r in job.plans] == [(4, 2), (4, 2)]
