"""Tokens without generating, by this worker's tokenizer: llama-server's answers, with vLLM's
fields beside them where lm-evaluation-harness reads them."""

from __future__ import annotations

from flask import Response, jsonify

from app.api.http.body import loaded_engine
from app.api.http.errors import InvalidRequestError
from app.api.tokens.request import DetokenizeRequest, TokenizeRequest
from app.settings.current import current_config


def tokenized(asked: TokenizeRequest) -> Response:
    """Text to token ids (and their pieces, with `with_pieces`)."""
    tokenizer = loaded_engine().tokenizer
    tokens = tokenizer.tokenize(asked.text, asked.add_special, asked.parse_special)
    # llama-server's `tokens`, with vLLM's `count` and `max_model_len` beside them.
    sizes: dict[str, object] = {"count": len(tokens), "max_model_len": current_config().n_ctx}
    if asked.token_strs:  # vLLM's: the strings of the vocabulary (Ġ for a space in BPE)
        sizes["token_strs"] = tokenizer.vocabulary_strings(tokens)
    if not asked.with_pieces:
        return jsonify({"tokens": tokens, **sizes})
    read = tokenizer.pieces(tokens)
    pieces = [{"id": token, "piece": _piece(piece)} for token, piece in zip(tokens, read, strict=True)]
    return jsonify({"tokens": pieces, **sizes})


def _piece(raw: bytes) -> str | list[int]:
    """A piece as text, or as its bytes when it is part of a character (as llama.cpp's server shows it)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return list(raw)


def detokenized(asked: DetokenizeRequest) -> Response:
    """Token ids to text (as `content`, llama-server's, and `prompt`, vLLM's)."""
    tokenizer = loaded_engine().tokenizer
    if not tokenizer.in_vocabulary(list(asked.tokens)):
        raise InvalidRequestError(
            f"tokens: every id must be from 0 to {tokenizer.vocabulary_size - 1}.", param="tokens"
        )
    text = tokenizer.detokenize(list(asked.tokens))
    return jsonify({"content": text, "prompt": text})


def tokenizer_info() -> Response:
    """The special tokens and chat template (vLLM's endpoint, which lm-evaluation-harness reads)."""
    tokenizer = loaded_engine().tokenizer
    return jsonify(
        {
            "model": current_config().model_id,
            "bos_token": tokenizer.bos_text or None,
            "eos_token": tokenizer.eos_text,
            "pad_token": None,
            "chat_template": tokenizer.chat_template,
            "vocabulary_size": tokenizer.vocabulary_size,
        }
    )
