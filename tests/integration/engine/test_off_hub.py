"""A view's tokenizing runs off the gevent hub: the worker's other greenlets run meanwhile (off_hub.py).

The tokenizer's call into llama.cpp is wrapped to wait until a greenlet has run: on the hub's own
thread it would wait for ever (the hub cannot run the greenlet while it waits), so it gives up after
a bound and the test fails; off the hub, the greenlet runs and the call goes on at once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import gevent
import pytest

from app.engine.context import ContextShape
from app.engine.model import LoadedModel
from app.engine.tokenizer import Tokenizer
from app.settings.values import default_model_path

PROMPT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def tokenizer() -> Iterator[Tokenizer]:
    model = LoadedModel(default_model_path(), ContextShape(1, 512, 512, 512, 1))
    yield model.tokenizer
    model.close()


def waiting_for(tokenizer: Tokenizer, event: threading.Event, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make llama.cpp's tokenize wait for `event` (a native one: set from any thread); the threads it
    ran in are returned."""
    llama = tokenizer._model
    real = llama.tokenize
    threads: list[int] = []

    def tokenize(*args: Any, **kwargs: Any) -> list[int]:
        threads.append(threading.get_ident())
        if not event.wait(timeout=20):  # only a failure waits this long: the hub never ran
            raise AssertionError("the hub did not run while the prompt was tokenized")
        result: list[int] = real(*args, **kwargs)
        return result

    monkeypatch.setattr(llama, "tokenize", tokenize)
    return threads


def test_a_greenlets_prompt_is_tokenized_while_the_hub_runs_the_others(
    tokenizer: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = tokenizer.chat_tokens(PROMPT)
    other_ran = threading.Event()
    threads = waiting_for(tokenizer, other_ran, monkeypatch)
    planning = gevent.spawn(tokenizer.chat_tokens, PROMPT)  # as a view plans a request
    gevent.spawn(other_ran.set)  # another request's greenlet, which runs only if the hub does
    assert planning.get(timeout=30) == expected
    assert threads and threads[0] != threading.get_ident()  # in a native thread, not the hub's


def test_the_engines_native_thread_tokenizes_in_place(
    tokenizer: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = tokenizer.text("Once upon a time")
    ready = threading.Event()
    ready.set()
    threads = waiting_for(tokenizer, ready, monkeypatch)
    result: list[list[int]] = []
    native = threading.Thread(target=lambda: result.append(tokenizer.text("Once upon a time")))
    native.start()
    native.join(timeout=30)
    assert result == [expected] and threads == [native.ident]


def test_a_grammar_is_checked_off_the_hub_and_a_bad_one_still_refused(
    tokenizer: Tokenizer, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from app.engine.errors import GrammarError

    other_ran = threading.Event()
    threads = waiting_for(tokenizer, other_ran, monkeypatch)  # a grammar's <token> is tokenized
    checking = gevent.spawn(tokenizer.check_grammar, 'root ::= <|im_end|> "yes"')
    gevent.spawn(other_ran.set)
    checking.get(timeout=30)
    assert threads and threads[0] != threading.get_ident()

    def refusal(gbnf: str) -> GrammarError | None:  # as the view that checks it: the error is its 400
        try:
            tokenizer.check_grammar(gbnf)
        except GrammarError as refused:
            return refused
        return None

    assert isinstance(gevent.spawn(refusal, "root ::= undefined-rule").get(timeout=30), GrammarError)
    # Refused in the greenlet that asked (a 400), not printed as a failed task by gevent's pool
    # (a traceback in the worker's log, which the tests read as an error).
    assert "Traceback" not in capfd.readouterr().err


def test_pieces_not_read_before_are_read_off_the_hub(
    tokenizer: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens = tokenizer.text("Pieces of a text nobody asked for before: zebra quartz")
    other_ran = threading.Event()
    real = tokenizer._piece
    threads: list[int] = []

    def piece(token: int, special: bool) -> bytes:
        threads.append(threading.get_ident())
        if not other_ran.wait(timeout=20):
            raise AssertionError("the hub did not run while the pieces were read")
        return real(token, special)

    monkeypatch.setattr(tokenizer, "_piece", piece)
    reading = gevent.spawn(tokenizer.pieces, tokens)  # as /tokenize with_pieces does
    gevent.spawn(other_ran.set)
    assert b"".join(reading.get(timeout=30)).decode().endswith("zebra quartz")
    assert threads and threading.get_ident() not in threads
