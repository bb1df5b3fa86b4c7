"""What every generating request asks, typed: how many tokens, how to sample, when to stop, how many choices.

The sampling fields are the engine's `Sampling`, declared once there: the schemas' loaded
values are gathered by its field names (`sampling_of`), never by a list kept here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from app.engine.types import Sampling

SAMPLING_FIELDS = tuple(f.name for f in fields(Sampling))
_TUPLES = frozenset(f.name for f in fields(Sampling) if "tuple" in str(f.type))  # JSON lists in, tuples kept


def sampling_of(loaded: Mapping[str, Any]) -> Sampling:
    """The engine's Sampling from the loaded fields of its names (those left out: llama.cpp's defaults)."""
    given: dict[str, Any] = {name: loaded[name] for name in SAMPLING_FIELDS if loaded.get(name) is not None}
    given.update({name: tuple(given[name]) for name in _TUPLES if name in given})
    return Sampling(**given)


@dataclass(frozen=True)
class AdapterScale:
    """llama-server's `lora` entry: an adapter by id (or index) and its scale for this request."""

    id: int | str
    scale: float


@dataclass(frozen=True)
class Constraint:
    """What the answer's text must follow, asked with llama-server's or vLLM's fields: a JSON
    schema (`json_schema`, {} any object), any JSON object, GBNF, a regular expression, or one of
    some strings; `param` names the field that asked, for errors."""

    kind: Literal["json_schema", "json_object", "grammar", "regex", "choice", "structural_tag"]
    value: Any
    param: str


# Each field that sets a constraint, its kind, in the order they are looked for.
CONSTRAINT_FIELDS: tuple[tuple[str, str], ...] = (
    ("json_schema", "json_schema"),
    ("grammar", "grammar"),
    ("structured_outputs.json", "json_schema"),
    ("structured_outputs.json_object", "json_object"),
    ("structured_outputs.grammar", "grammar"),
    ("structured_outputs.regex", "regex"),
    ("structured_outputs.choice", "choice"),
    ("structured_outputs.structural_tag", "structural_tag"),
    ("guided_json", "json_schema"),
    ("guided_grammar", "grammar"),
    ("guided_regex", "regex"),
    ("guided_choice", "choice"),
)


def constraints_asked(loaded: Mapping[str, Any]) -> list[Constraint]:
    """Every constraint the loaded fields set (more than one is the client's error)."""
    found = []
    for param, kind in CONSTRAINT_FIELDS:
        head, _, tail = param.partition(".")
        value = (loaded.get(head) or {}).get(tail) if tail else loaded.get(head)
        if value is not None and value is not False and value != "":
            found.append(Constraint(kind, value, param))  # type: ignore[arg-type]
    return found


@dataclass(frozen=True, kw_only=True)
class GenerationOptions:
    """The fields every completion shares (chat, text, llama-server's, and those converted to chat)."""

    model: str | None = None
    max_tokens: int | None = None
    max_param: str = "max_tokens"  # the field the client set it with, for errors to name
    min_tokens: int = 0
    sampling: Sampling = field(default_factory=Sampling)
    stop: tuple[str, ...] = ()
    n: int = 1
    logit_bias: Mapping[str, float] = field(default_factory=dict)
    ignore_eos: bool = False
    lora: tuple[AdapterScale, ...] | None = None
    # Speculative decoding, as llama-server takes it per request (None: the server's setting).
    speculative: bool | None = None
    speculative_n_max: int | None = None
    speculative_n_min: int | None = None
    stream: bool = False
    include_usage: bool = False
    timings_per_token: bool = False  # llama-server's: `timings` on every streamed event
    return_progress: bool = False  # llama-server's: `prompt_progress` events while the prompt evaluates
    prompt_cache_key: str | None = None  # OpenAI's: requests that share it are served where it is cached
    cache_salt: str | None = None  # vLLM's: requests share cached prompts only with the same salt
    prediction: str | None = None  # OpenAI's predicted output, its parts joined: drafts for the answer
    constraint: Constraint | None = None  # llama-server's or vLLM's, beside response_format
    priority: int = 0  # vLLM's: lower goes first among waiting requests (LLM_PRIORITY_HEADER may set it)
    n_keep: int = 0  # llama-server's context shift: prompt tokens kept (-1: all of them)
    n_discard: int = 0  # and tokens dropped after them (0: half of the rest)


def generation_fields(loaded: Mapping[str, Any]) -> dict[str, Any]:
    """GenerationOptions' arguments from a generation schema's loaded fields."""
    stop = loaded.get("stop")
    lora = loaded.get("lora")
    return {
        "model": loaded.get("model"),
        "max_tokens": loaded.get("max_tokens"),
        "min_tokens": loaded.get("min_tokens") or 0,
        "sampling": sampling_of(loaded),
        "stop": (stop,) if isinstance(stop, str) else tuple(stop or ()),
        "n": loaded.get("n") or 1,
        "logit_bias": loaded.get("logit_bias") or {},
        "ignore_eos": bool(loaded.get("ignore_eos")),
        "lora": None if lora is None else tuple(AdapterScale(e["id"], e["scale"]) for e in lora),
        "speculative": loaded.get("speculative"),
        "speculative_n_max": loaded.get("speculative_n_max"),
        "speculative_n_min": loaded.get("speculative_n_min"),
        "stream": bool(loaded.get("stream")),
        "include_usage": bool((loaded.get("stream_options") or {}).get("include_usage")),
        "timings_per_token": bool(loaded.get("timings_per_token")),
        "return_progress": bool(loaded.get("return_progress")),
        "prompt_cache_key": loaded.get("prompt_cache_key"),
        "cache_salt": loaded.get("cache_salt"),
        "prediction": _prediction_text(loaded.get("prediction")),
        "constraint": next(iter(constraints_asked(loaded)), None),
        "priority": loaded.get("priority") or 0,
        "n_keep": loaded.get("n_keep") or 0,
        "n_discard": loaded.get("n_discard") or 0,
    }


def _prediction_text(prediction: Mapping[str, Any] | None) -> str | None:
    """The predicted answer's text (OpenAI's content: a string, or text parts joined)."""
    if prediction is None:
        return None
    content = prediction["content"]
    return content if isinstance(content, str) else "".join(part["text"] for part in content)
