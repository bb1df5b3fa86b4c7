"""Text completion requests, typed: OpenAI's `/v1/completions` and llama-server's own `/completion`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from app.api.requests.generation import GenerationOptions, generation_fields


@dataclass(frozen=True, kw_only=True)
class CompletionRequest(GenerationOptions):
    """Prompts to continue (text or token ids), each `n` times."""

    prompts: list[str | list[int]] = field(default_factory=list)
    echo: bool = False
    suffix: str | None = None  # fill in the middle
    logprobs: int | None = None  # the likeliest tokens' log-probabilities per position

    @property
    def scoring(self) -> bool:
        """echo with logprobs: the prompt's own tokens are scored (lm-eval's loglikelihood)."""
        return self.echo and self.logprobs is not None


@dataclass(frozen=True, kw_only=True)
class LlamaCompletionRequest(GenerationOptions):
    """llama-server's `/completion`: one prompt, `n_probs` probabilities per token, the token ids."""

    prompt: str | list[int] = ""
    n_probs: int = 0
    return_tokens: bool = False
    seed: int | None = None  # as the client sent it, echoed in `generation_settings`
    n_indent: int = 0  # a line indented less than this ends the answer before it (0: off)
    t_max_predict_ms: int = 0  # generating longer than this, the next newline ends the answer (0: off)


@dataclass(frozen=True, kw_only=True)
class InfillRequest(LlamaCompletionRequest):
    """llama-server's `/infill`: the code around the cursor, other files' chunks, what is typed."""

    input_prefix: str = ""
    input_suffix: str = ""
    input_extra: tuple[tuple[str, str], ...] = ()  # (filename, text) of other files' chunks


def completion_request(loaded: Mapping[str, Any]) -> CompletionRequest:
    return CompletionRequest(
        **generation_fields(loaded),
        prompts=loaded["prompt"],
        echo=bool(loaded.get("echo")),
        suffix=loaded.get("suffix") or None,
        logprobs=loaded.get("logprobs"),
    )


def llama_completion_request(loaded: Mapping[str, Any]) -> LlamaCompletionRequest:
    """llama-server's names: `n_predict` wins over max_tokens (-1: up to the context), `n_cmpl`
    (or its alias `n`) completions of the prompt."""
    options = generation_fields(loaded)
    options["n"] = loaded.get("n_cmpl") or loaded.get("n") or 1
    predict = loaded.get("n_predict")
    if predict is not None:
        options["max_tokens"], options["max_param"] = (predict if predict >= 0 else None), "n_predict"
    return LlamaCompletionRequest(**options, **_llama_fields(loaded))


def infill_request(loaded: Mapping[str, Any]) -> InfillRequest:
    """`/infill`: /completion's fields, and the text around the cursor."""
    options = llama_completion_request(loaded)
    return InfillRequest(
        **{f.name: getattr(options, f.name) for f in fields(LlamaCompletionRequest)},
        input_prefix=loaded["input_prefix"],
        input_suffix=loaded["input_suffix"],
        input_extra=tuple((c.get("filename") or "tmp", c["text"]) for c in loaded.get("input_extra") or ()),
    )


def _llama_fields(loaded: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "prompt": loaded.get("prompt") or "",
        "n_probs": loaded.get("n_probs") or 0,
        "return_tokens": bool(loaded.get("return_tokens")),
        "seed": loaded.get("seed"),
        "n_indent": loaded.get("n_indent") or 0,
        "t_max_predict_ms": loaded.get("t_max_predict_ms") or 0,
    }
