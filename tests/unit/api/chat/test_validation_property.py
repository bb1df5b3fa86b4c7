"""Property: whatever JSON a client sends, the answer is a completion or OpenAI's error shape, never a 5xx."""

from __future__ import annotations

import json
from typing import Any

from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=20,
)
FIELDS = [
    "model",
    "messages",
    "prompt",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repeat_penalty",
    "presence_penalty",
    "frequency_penalty",
    "stop",
    "seed",
    "stream",
    "stream_options",
    "user",
    "n",
    "echo",
    "suffix",
    "logprobs",
    "top_logprobs",
    "logit_bias",
    "response_format",
    "tools",
    "tool_choice",
    "best_of",
]
message = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "developer", "user", "assistant", "tool", "x"]) | json_values},
    optional={"content": st.text(max_size=30) | json_values, "name": json_values, "tool_calls": json_values},
)
# Bodies that look like requests (known fields, often the right shape, any values), and anything at all.
request_like = st.fixed_dictionaries(
    {},
    optional={
        **{name: json_values for name in FIELDS},
        "messages": st.lists(message, max_size=3) | json_values,
        "prompt": st.text(max_size=30) | json_values,
    },
)
bodies = request_like | json_values


def check_answer(response: Any) -> None:
    assert response.status_code < 500, response.get_data(as_text=True)
    if response.status_code == 200:
        if response.mimetype == "text/event-stream":
            data = response.get_data(as_text=True)
            assert data.endswith("data: [DONE]\n\n")
        else:
            assert response.get_json()["choices"]
    else:
        error = response.get_json()["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["message"]


# derandomize: the same examples every run, so CI is a gate, not a lottery.
@settings(
    max_examples=300,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    deadline=None,
    derandomize=True,
)
@given(body=bodies, path=st.sampled_from(["/v1/chat/completions", "/v1/completions"]))
def test_any_json_body(client: FlaskClient, body: Any, path: str) -> None:
    check_answer(client.post(path, data=json.dumps(body), content_type="application/json"))


@settings(
    max_examples=100,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    deadline=None,
    derandomize=True,
)
@given(raw=st.binary(max_size=200), path=st.sampled_from(["/v1/chat/completions", "/v1/completions"]))
def test_any_bytes(client: FlaskClient, raw: bytes, path: str) -> None:
    check_answer(client.post(path, data=raw, content_type="application/json"))
