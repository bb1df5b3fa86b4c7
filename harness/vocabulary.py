"""Whether llama.cpp's own grammar sampler lets a model write a text and then end: the grammars we
make, checked by the engine that enforces them (the default model's vocabulary, no weights)."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from contextlib import contextmanager

import llama_cpp

from app.settings.values import default_model_path


class Vocabulary:
    """The default model's vocabulary, loaded without its weights."""

    def __init__(self, model: llama_cpp.llama_model_p) -> None:
        self.model = model
        self.vocab = llama_cpp.llama_model_get_vocab(model)
        self.eos = llama_cpp.llama_vocab_eos(self.vocab)

    def tokens(self, text: str) -> list[int]:
        data = text.encode()
        room = len(data) + 8
        buffer = (llama_cpp.llama_token * room)()
        count = llama_cpp.llama_tokenize(self.vocab, data, len(data), buffer, room, False, False)
        assert count >= 0, text
        return list(buffer[:count])

    def writes(self, text: str) -> bool:
        """Whether the model can write `text` at all (a character the vocabulary lacks becomes <unk>)."""
        buffer = ctypes.create_string_buffer(256)
        pieces = b""
        for token in self.tokens(text):
            size = llama_cpp.llama_token_to_piece(self.vocab, token, buffer, len(buffer), 0, False)
            pieces += buffer.raw[: max(size, 0)]
        return pieces == text.encode()

    def accepts(self, gbnf: str, text: str) -> bool:
        """True when the grammar allows `text`, token by token, and then the end of the answer."""
        sampler = llama_cpp.llama_sampler_init_grammar(self.vocab, gbnf.encode(), b"root")
        assert sampler, gbnf  # llama.cpp could not build it
        try:
            for token in [*self.tokens(text), self.eos]:
                if not self._allowed(sampler, token):
                    return False
                if token != self.eos:
                    llama_cpp.llama_sampler_accept(sampler, token)
            return True
        finally:
            llama_cpp.llama_sampler_free(sampler)

    @staticmethod
    def _allowed(sampler: llama_cpp.llama_sampler_p, token: int) -> bool:
        candidate = llama_cpp.llama_token_data(token, 0.0, 0.0)
        array = llama_cpp.llama_token_data_array(ctypes.pointer(candidate), 1, -1, False)
        llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
        return bool(candidate.logit != float("-inf"))


@contextmanager
def default_vocabulary() -> Iterator[Vocabulary]:
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(default_model_path()).encode(), params)
    assert model, "the default model did not load"
    try:
        yield Vocabulary(model)
    finally:
        llama_cpp.llama_model_free(model)
