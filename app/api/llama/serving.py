"""llama-server's completion and infill served: the prompt tokenized (or laid out for fill-in-the-
middle), planned, generated and presented in llama-server's shape (the views in routes.py parse)."""

from __future__ import annotations

from dataclasses import replace

from flask import Response

from app.api.generation.loop import generate
from app.api.generation.planning import plan_choices
from app.api.generation.served import plan_inputs
from app.api.http import media
from app.api.http.body import generating_engine
from app.api.http.errors import NotSupportedError
from app.api.llama.presenter import LlamaCompletionFacts, LlamaPresenter
from app.api.prompting import conversation, structured_output
from app.api.prompting.text_prompt import prompt_of
from app.api.requests.completion import InfillRequest, LlamaCompletionRequest
from app.engine import infill as repo_infill
from app.engine.media import MediaRun
from app.settings.current import current_config


def completion(asked: LlamaCompletionRequest) -> Response:
    """One prompt continued, with `n_probs` token probabilities (its media as llama-server reads them)."""
    engine = generating_engine()
    runs: tuple[MediaRun, ...] = ()
    if isinstance(asked.prompt, str) and media.has_media(asked.prompt):  # llama-server's multimodal form
        tokens, runs = conversation.media_tokens(engine.tokenizer, asked.prompt, current_config(), "prompt")
        text = media.shown(asked.prompt)
    elif isinstance(asked.prompt, str):  # as llama-server tokenizes it here: BOS, control tokens parsed
        tokens, text = engine.tokenizer.parsed(asked.prompt), asked.prompt
    else:
        tokens, text = prompt_of(engine.tokenizer, asked.prompt, None)
    return _answer(asked, tokens, text, runs)


def infill(asked: InfillRequest) -> Response:
    """The code around the cursor filled in, with chunks of other files, in the model's repo-level layout."""
    engine = generating_engine()
    tokenizer = engine.tokenizer
    if not tokenizer.supports_infill:
        missing = [
            f"{name} token is missing." for name, token in FIM_NAMES.items() if tokenizer.fim[token] < 0
        ]
        raise NotSupportedError(f"Infill is not supported by this model: {' '.join(missing)}")
    config = current_config()
    tokens = repo_infill.repo_infill(
        tokenizer, asked.input_prefix, asked.input_suffix, asked.input_extra, str(asked.prompt),
        config.n_batch, config.n_ctx,
    )  # fmt: skip
    return _answer(asked, tokens, tokenizer.detokenize(tokens), ())


FIM_NAMES = {"prefix": "pre", "suffix": "suf", "middle": "mid"}  # as llama-server names them


def _answer(
    asked: LlamaCompletionRequest, tokens: list[int], text: str, runs: tuple[MediaRun, ...]
) -> Response:
    """Continue `tokens` as llama-server's /completion answers: n_cmpl choices, its answer object."""
    engine = generating_engine()
    plans = plan_choices(  # n_cmpl of them
        asked,
        [tokens],
        plan_inputs(),
        prompt_param="prompt",
        grammar=structured_output.llama_grammar(engine.tokenizer, asked.constraint),
        # Each streamed event carries its token ids, as llama-server's do: the entries hold them.
        logprobs=asked.n_probs if asked.n_probs or asked.return_tokens or asked.stream else None,
        vocabulary_size=engine.tokenizer.vocabulary_size,
        media=runs,
    )
    plans = [replace(r, n_indent=asked.n_indent, t_max_predict_ms=asked.t_max_predict_ms) for r in plans]
    first = plans[0]
    settings = {"n_predict": first.max_tokens, "seed": asked.seed, "n_probs": asked.n_probs,
                "temperature": first.sampling.temperature, "stream": asked.stream}  # fmt: skip
    config = current_config()
    facts = LlamaCompletionFacts(
        config.model_id, text, len(tokens), asked.n_probs, asked.return_tokens, settings, config.n_ctx,
        asked.timings_per_token,
    )  # fmt: skip
    return generate(engine, asked.stream, plans, LlamaPresenter(facts), len(tokens))
