"""What every generating request asks, typed: how many tokens, how to sample, when to stop, how many choices.

The sampling fields are the engine's `Sampling`, declared once there: the schemas' loaded
values are gathered by its field names (`sampling_of`), never by a list kept here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

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
    # llama-server's constraints: the answer's JSON schema ({} any object), or GBNF as it is.
    json_schema: Mapping[str, Any] | None = None
    grammar: str | None = None


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
        "json_schema": loaded.get("json_schema"),
        "grammar": loaded.get("grammar") or None,
    }
