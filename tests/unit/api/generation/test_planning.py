"""A typed request turned into the engine's requests: logit bias, max_tokens, choices and seeds.

Planning reads nothing but its arguments: no app, no request, only the inputs a view read."""

from __future__ import annotations

import pytest

from app.api.generation.planning import PlanInputs, logit_bias, plan, plan_choices, request_priority
from app.api.http.errors import ContextLengthError, InvalidRequestError, PermissionDeniedError
from app.api.requests.chat import chat_request
from app.api.requests.generation import GenerationOptions
from app.engine.types import Sampling
from tests.unit.conftest import make_config

INPUTS = PlanInputs(make_config(), memory=None, key_name=None, priority_header=None)  # LLM_N_CTX=64


def test_logit_bias_keys_become_token_ids() -> None:
    assert logit_bias({"0": -100, "17": 5.5, "999": 100}, vocabulary_size=1000) == {
        0: -100.0,
        17: 5.5,
        999: 100.0,
    }
    assert logit_bias({}, vocabulary_size=1000) == {}


@pytest.mark.parametrize("key", ["1000", "-1", "abc", "1.5", "", " 3"])
def test_logit_bias_refuses_what_is_not_a_token_of_this_model(key: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        logit_bias({key: 1}, vocabulary_size=1000)
    assert caught.value.param == "logit_bias" and "0 to 999" in caught.value.message


def test_max_tokens_defaults_to_the_rest_of_the_context() -> None:
    assert plan(GenerationOptions(), [1] * 10, INPUTS, prompt_param="prompt").max_tokens == 54
    assert plan(GenerationOptions(max_tokens=5), [1] * 10, INPUTS, prompt_param="prompt").max_tokens == 5


def test_newer_name_of_max_tokens_is_the_one_named_in_errors() -> None:
    with pytest.raises(ContextLengthError) as caught:
        chat = chat_request({"messages": [], "max_completion_tokens": 60, "max_tokens": 3})
        plan(chat, [1] * 10, INPUTS, prompt_param="messages")
    assert caught.value.param == "max_completion_tokens" and caught.value.code == "context_length_exceeded"


def test_a_prompt_filling_the_context_names_the_prompt() -> None:
    with pytest.raises(ContextLengthError) as caught:
        plan(GenerationOptions(), [1] * 64, INPUTS, prompt_param="prompt")
    assert caught.value.param == "prompt" and "64 in the prompt" in caught.value.message


def test_choices_are_ordered_prompt_by_prompt_with_consecutive_seeds() -> None:
    requests = plan_choices(
        GenerationOptions(n=2, sampling=Sampling(seed=10), logit_bias={"3": 1}),
        [[1], [1, 1]],
        INPUTS,
        prompt_param="prompt",
        vocabulary_size=8,
    )
    assert [r.index for r in requests] == [0, 1, 2, 3]
    assert [len(r.prompt_tokens) for r in requests] == [1, 1, 2, 2]
    assert [r.sampling.seed for r in requests] == [10, 11, 10, 11]
    assert all(r.logit_bias == {3: 1.0} for r in requests)


def test_more_choices_than_the_limit_is_a_400() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        plan_choices(
            GenerationOptions(n=5), [[1], [1]], INPUTS, prompt_param="prompt", vocabulary_size=8
        )  # LLM_MAX_N: 8
    assert caught.value.param == "n"


def test_the_key_and_the_salt_make_the_cache_scope_and_the_header_the_priority() -> None:
    alice = PlanInputs(make_config(), memory=None, key_name="alice", priority_header=None)
    scopes = {
        plan(GenerationOptions(cache_salt=salt), [1], inputs, prompt_param="prompt").cache_scope
        for inputs in (INPUTS, alice)
        for salt in (None, "s")
    }
    assert len(scopes) == 4 and "" in scopes  # no key, no salt: the one shared scope
    assert request_priority(5, None, "-3") == 5  # no header named: the body's
    assert request_priority(5, "x-priority", None) == 5  # named, not sent: the body's
    assert request_priority(5, "x-priority", " -3 ") == -3
    with pytest.raises(InvalidRequestError) as caught:
        request_priority(0, "x-priority", "high")
    assert caught.value.param == "x-priority"


def test_a_tenant_may_put_its_request_later_but_not_ahead_of_others() -> None:
    assert request_priority(5, None, None, tenant=True) == 5  # later: its own to choose
    with pytest.raises(PermissionDeniedError) as caught:
        request_priority(-5, None, None, tenant=True)  # ahead of every other tenant's
    assert caught.value.param == "priority" and caught.value.code == "operator_only"
    assert request_priority(-5, None, None, tenant=False) == -5  # an operator's, or a server without keys
    assert request_priority(0, "x-priority", "-7", tenant=True) == -7  # the operator's gateway said so
