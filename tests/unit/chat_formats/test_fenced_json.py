"""A JSON answer bare or ```json fenced: its content the JSON alone, and read part-way, never taken back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.chat_formats.fenced_json import unwrap

ANSWERS = {
    '```json {\n    "name": "Alice",\n    "age": 31\n}\n\n```': '{\n    "name": "Alice",\n    "age": 31\n}',
    '\n {"a": 1}\n ': '{"a": 1}',
    '```json\n[1, "`x`"]```': '[1, "`x`"]',
    '```json {"cut": "by max_tok': '{"cut": "by max_tok',
    "": "",
}


@pytest.mark.parametrize(("text", "content"), ANSWERS.items())
def test_the_content_is_the_json_alone(text: str, content: str) -> None:
    assert unwrap(text, partial=False) == content


@given(
    st.sampled_from(["", " ", "\n", "```json", "```json ", "```json\n"]),
    st.text(alphabet='{}[]":, \n`abc1', max_size=30),
    st.sampled_from(["", "\n", " ```", "\n\n```", "```"]),
)
def test_what_a_stream_has_sent_is_never_taken_back(head: str, json_text: str, tail: str) -> None:
    text = head + json_text + tail
    final = unwrap(text, partial=False)
    sent = ""
    for end in range(len(text) + 1):
        now = unwrap(text[:end], partial=True)
        assert now.startswith(sent), (text[:end], sent, now)
        sent = now
    assert final.startswith(sent)
