"""The data the engine takes and gives: a generation request in, chunks of text out."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.engine.media import MediaRun

# llama-server's sampler names (common/sampling.cpp), with the aliases it takes, to ours.
SAMPLER_NAMES = {
    "penalties": "penalties", "dry": "dry", "top_n_sigma": "top_n_sigma", "top_k": "top_k",
    "typ_p": "typical_p", "typical_p": "typical_p", "typ": "typical_p", "top_p": "top_p", "nucleus": "top_p",
    "min_p": "min_p", "xtc": "xtc", "temperature": "temperature", "temp": "temperature", "infill": "infill",
}  # fmt: skip
SAMPLER_NAMES.update({name.replace("_", "-"): to for name, to in list(SAMPLER_NAMES.items())})
SAMPLER_NAMES.update({name.replace("_", ""): to for name, to in list(SAMPLER_NAMES.items())})
# llama-server's one-letter names, in its `samplers` string form ("edkypmxt"; common/sampling.cpp).
SAMPLER_CHARS = {
    "d": "dry", "k": "top_k", "y": "typical_p", "p": "top_p", "s": "top_n_sigma", "m": "min_p",
    "t": "temperature", "x": "xtc", "i": "infill", "e": "penalties",
}  # fmt: skip


@dataclass(frozen=True)
class Sampling:
    """Sampling settings; the defaults are llama.cpp server's."""

    temperature: float = 0.8
    top_p: float = 0.95
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None
    repeat_last_n: int = 64  # the penalties' window (-1: the whole context, 0: off)
    typical_p: float = 1.0  # 1: off
    min_keep: int = 0  # top_p, min_p, typical_p and XTC keep at least this many candidates
    top_n_sigma: float = -1.0  # <= 0: off
    xtc_probability: float = 0.0  # 0: off
    xtc_threshold: float = 0.1
    dynatemp_range: float = 0.0  # 0: a fixed temperature
    dynatemp_exponent: float = 1.0
    dry_multiplier: float = 0.0  # 0: off
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    dry_penalty_last_n: int = 64  # -1: the whole context, 0: off
    dry_sequence_breakers: tuple[str, ...] = ("\n", ":", '"', "*")
    mirostat: int = 0  # 1 or 2: Mirostat in place of the truncating samplers
    mirostat_tau: float = 5.0
    mirostat_eta: float = 0.1
    # The truncating samplers' order, by llama-server's names; None: its default order.
    samplers: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ThinkingBudget:
    """At most `tokens` tokens of thinking: then `closing` (the format's end tag, as tokens) is
    written for the model, and the answer follows. `opened`: the prompt ended inside the tags."""

    tokens: int
    opening: str
    closing: str
    closing_tokens: tuple[int, ...]
    opened: bool = False


@dataclass(frozen=True)
class DraftLimits:
    """Speculative decoding: at most `n_max` drafted tokens a step (0: none); fewer than `n_min`, none."""

    n_max: int
    n_min: int = 0


@dataclass(frozen=True)
class ChoicePlan:
    """What the engine needs to generate one choice: the prompt's tokens and how to sample."""

    prompt_tokens: list[int]
    max_tokens: int
    sampling: Sampling = field(default_factory=Sampling)
    stop: list[str] = field(default_factory=list)
    index: int = 0  # the choice this generates
    logit_bias: dict[int, float] = field(default_factory=dict)
    logprobs: int | None = None  # None: off; k: the chosen token's and the top k alternatives
    grammar: str | None = None  # GBNF the output must follow
    # Lazy grammar: free text until one of these regular expressions matches the output so far
    # (its first group marks where the grammar starts), then the grammar holds.
    grammar_triggers: tuple[str, ...] = ()
    thinking_budget: ThinkingBudget | None = None
    ignore_eos: bool = False  # keep generating past end-of-generation tokens (benchmarks)
    min_tokens: int = 0  # no end-of-generation token or stop string before this many tokens
    prompt_logprobs: bool = False  # also the log-probability of every prompt token (its first: None)
    drafts: DraftLimits | None = None  # speculative decoding's limits; None: the server's
    # LoRA: each adapter's scale for this choice (the model's adapters in order); None: the
    # worker's global scales. Choices with different scales never share a decode step.
    adapters: tuple[float, ...] | None = None
    # Whose cached prompts it may resume (a tenant's, cache_scope.py): cells, saved states and
    # files of another scope are never resumed, shared or reported to it. "": the shared one.
    cache_scope: str = ""
    # vLLM's `priority`: a waiting request with a lower value gets the next free sequence first.
    priority: int = 0
    # Images and audio clips among the prompt's tokens (their positions hold placeholders).
    media: tuple[MediaRun, ...] = ()
    progress: bool = False  # llama-server's `return_progress`: a chunk after each step of the prompt
    prediction: tuple[int, ...] = ()  # OpenAI's predicted output, as tokens: the best draft there is
    shift: ContextShift | None = None  # at the context's end: drop part of the history and go on
    pin: PinnedPrefix | None = None  # Anthropic's cache_control: hold this prefix in the host cache a while
    # The conversation it belongs to (an agent's session id, `prompt_cache_key`; within its cache
    # scope), "" for none: the longest prompt each session holds is the last cache a new prompt takes.
    session: str = ""
    # llama-server's /infill limits (0: off): a line indented less than n_indent ends the answer
    # before it; past t_max_predict_ms of generating, the next newline ends it.
    n_indent: int = 0
    t_max_predict_ms: int = 0


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token with its log-probability and the most likely alternatives."""

    token: int
    piece: bytes
    logprob: float | None  # None for a prompt's first token, which nothing predicted
    top: tuple[tuple[int, bytes, float], ...]


@dataclass(frozen=True)
class PinnedPrefix:
    """A prompt prefix a client asked to stay cached (Anthropic's `cache_control`): its first `tokens`,
    for `seconds` after each use."""

    tokens: int
    seconds: float


@dataclass(frozen=True)
class ContextShift:
    """llama-server's context shift for one request: keep the first `n_keep` tokens (-1: the whole
    prompt), drop `n_discard` after them (0: half of the rest) when the context is full."""

    n_keep: int = 0
    n_discard: int = 0


@dataclass(frozen=True)
class PromptProgress:
    """How far a choice's prompt is evaluated: llama-server's `prompt_progress` (its names)."""

    total: int  # the prompt's tokens
    cache: int  # of which served from the KV cache
    processed: int  # of which in the cache now (served or evaluated)
    time_ms: int  # since its evaluation began


@dataclass(frozen=True)
class Chunk:
    """A piece of generated text; the last chunk of a choice has `finish_reason` set.

    `finish_reason` is OpenAI's `stop` or `length`, `cancelled` (the client left),
    `kv_full` (the shared KV cache had no room left for this sequence), or `error`
    (then `error` holds the traceback for the log, never for the client).
    """

    text: str = ""
    finish_reason: str | None = None
    completion_tokens: int = 0
    index: int = 0
    logprobs: tuple[TokenLogprob, ...] = ()
    error: str | None = None
    cached_tokens: int = 0  # prompt tokens served from the KV cache (set on a choice's last chunk)
    stop_sequence: str | None = None  # the stop string that ended the choice, if one did
    # With prompt_logprobs, on the chunk sent once the prompt is evaluated: one per prompt token.
    prompt_logprobs: tuple[TokenLogprob, ...] = ()
    progress: PromptProgress | None = None  # a chunk of progress only: no text, nothing finished
    prediction_accepted: int = 0  # of the prediction's tokens, kept as drafts (on a choice's last chunk)
