"""One choice's token loop, run in the engine's native thread: sample, detokenize, stop, emit."""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any

from app.engine.grammar import grammar_from
from app.engine.sampling import logprob_of
from app.engine.text_assembly import TextAssembler
from app.engine.types import Chunk, GenerationRequest, TokenLogprob

if TYPE_CHECKING:
    from app.engine.generation import Generation
    from app.engine.tokenizer import Tokenizer


def decode(
    llama: Any, tokenizer: Tokenizer, request: GenerationRequest, generation: Generation, deadline: float
) -> tuple[str, int]:
    """Generate one choice, emitting its text; returns (finish reason, completion tokens).

    Every chunk carries the choice's token count so far. Touches no gevent object:
    chunks leave through `generation.emit`, which is thread-safe.
    """
    count, reason = 0, "length"
    assembler = TextAssembler(request.stop)
    pending: list[TokenLogprob] = []  # log-probabilities of tokens whose text is held back
    tokens = _tokens(llama, request)
    try:
        for token in tokens:
            if generation.cancelled:
                reason = "cancelled"
                break
            if tokenizer.is_end_of_generation(token):
                reason = "stop"
                break
            count += 1
            if request.logprobs is not None:
                pending.append(logprob_of(llama, token, request.logprobs))
            text = assembler.feed(tokenizer.piece(token))
            if text:
                generation.emit(Chunk(text, None, count, index=request.index, logprobs=tuple(pending)))
                pending.clear()
            if assembler.stopped:
                reason = "stop"
                break
            if count >= request.max_tokens or time.monotonic() > deadline:
                break  # "length": out of tokens or out of time
        tokens.close()
    except Exception:
        if not generation.cancelled:
            raise
        # The abort callback stopped llama_decode mid-token: a cancellation, not an error.
        reason = "cancelled"
    tail = assembler.finish()
    # Tokens of a stop string are not part of the answer, nor are their log-probabilities.
    tail_logprobs = () if assembler.stopped else tuple(pending)
    generation.emit(Chunk(tail, reason, count, index=request.index, logprobs=tail_logprobs))
    return reason, count


def _tokens(llama: Any, request: GenerationRequest) -> Any:
    sampling = request.sampling
    seed = sampling.seed if sampling.seed is not None else random.getrandbits(32)
    llama.set_seed(seed & 0xFFFFFFFF)
    llama.logit_bias = request.logit_bias
    return llama.generate(
        request.prompt_tokens,
        temp=sampling.temperature,
        top_p=sampling.top_p,
        top_k=sampling.top_k,
        min_p=sampling.min_p,
        repeat_penalty=sampling.repeat_penalty,
        presence_penalty=sampling.presence_penalty,
        frequency_penalty=sampling.frequency_penalty,
        grammar=grammar_from(request.grammar),
    )
