"""The overflow policy's pure parts: which messages make a turn, and the fewest turns dropped."""

from __future__ import annotations

from app.api.prompting import overflow
from app.api.requests.chat import ChatRequest


def m(role: str, text: str = "x") -> dict[str, str]:
    return {"role": role, "content": text}


CONVERSATION = [m("system"), m("developer"), m("user", "a"), m("assistant"), m("tool"), m("assistant"),
                m("user", "b"), m("assistant"), m("user", "c")]  # fmt: skip


def test_turns_begin_at_user_messages_after_the_leading_system_ones() -> None:
    assert overflow.turn_starts(CONVERSATION) == (2, [2, 6, 8])
    assert overflow.turn_starts([m("system")]) == (1, [])
    # A conversation opening with the assistant: that opening is a turn of its own.
    assert overflow.turn_starts([m("assistant"), m("user")]) == (0, [0, 1])


def test_dropping_turns_keeps_the_leading_messages_and_at_least_the_last_turn() -> None:
    assert overflow.without_turns(CONVERSATION, 1) == [*CONVERSATION[:2], *CONVERSATION[6:]]
    assert overflow.without_turns(CONVERSATION, 2) == [*CONVERSATION[:2], CONVERSATION[8]]
    assert overflow.without_turns(CONVERSATION, 9) == [*CONVERSATION[:2], CONVERSATION[8]]
    assert overflow.without_turns(CONVERSATION, 0) == CONVERSATION


def test_fit_drops_the_fewest_turns_that_make_it_fit() -> None:
    chat = ChatRequest(messages=CONVERSATION)
    renders: list[int] = []

    def render(asked: ChatRequest) -> int:  # a prompt of one token per message
        renders.append(len(asked.messages))
        return len(asked.messages)

    assert overflow.fit(chat, render, lambda size: size, 9)[2] == 0  # it fits: nothing dropped
    shorter, size, dropped = overflow.fit(chat, render, lambda size: size, 5)
    assert dropped == 4 and size == 5 and shorter.messages == overflow.without_turns(CONVERSATION, 1)
    assert overflow.fit(chat, render, lambda size: size, 3) == (
        ChatRequest(messages=overflow.without_turns(CONVERSATION, 2)),
        3,
        6,
    )
    assert overflow.fit(chat, render, lambda size: size, 2)[2] == 0  # not even the last turn fits: as it was
