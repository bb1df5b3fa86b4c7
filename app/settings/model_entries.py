"""The marshmallow schema of one LLM_MODELS entry: each key's type and bounds, declared once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from marshmallow import Schema, ValidationError, fields, post_load, pre_load, validates_schema

from app.chat_formats.detect import FORMATS, by_name
from app.settings import values

POOLINGS = ("mean", "cls", "last", "rank")
# llama-server's --cache-type-k/-v choices; each is a ggml type llama.cpp can store a KV cell in.
KV_TYPES = ("f16", "f32", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
# Speculative decoding: off, drafts from the choice's own tokens, or from a smaller model.
SPEC_TYPES = ("none", "ngram", "draft")
# Loaded with the server on its own workers, or by a worker of the on-demand pool when first asked for.
LOADS = ("startup", "on_demand")


class _Exact(fields.Field[Any]):
    """A JSON value of exactly one type (a bool is no integer here), checked by `check` after it; every
    message names the key, since the setting's line reads `entry N: <message>`."""

    def __init__(
        self,
        kind: type | tuple[type, ...],
        wrong: str,
        check: Any = None,
        *,
        required: bool = False,
        data_key: str | None = None,
    ) -> None:
        super().__init__(
            allow_none=not required,
            required=required,
            data_key=data_key,
            error_messages={"null": wrong, "required": wrong},
        )
        self.kind, self.wrong, self.check = kind, wrong, check

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kw: Any) -> Any:
        if type(value) not in (self.kind if isinstance(self.kind, tuple) else (self.kind,)):
            raise ValidationError(self.wrong)
        if self.check is not None and not self.check(value):
            raise ValidationError(self.wrong)
        return value


def _integer(key: str, low: int, high: int) -> _Exact:
    return _Exact(int, f"{key} must be an integer from {low} to {high}", lambda v: low <= v <= high)


def _choice(key: str, choices: tuple[str, ...]) -> _Exact:
    return _Exact(str, f"{key} must be one of {', '.join(choices)}", lambda v: v in choices, data_key=key)


def _flag(key: str) -> _Exact:
    return _Exact(bool, f"{key} must be true or false")


def _id() -> _Exact:
    return _Exact(str, "needs an id, a non-empty string", lambda v: bool(v.strip()), required=True)


class _ModelFile(fields.Field[str]):
    """A path to a GGUF file that exists (checked as LLM_MODEL_PATH is)."""

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kw: Any) -> str:
        try:
            return values.model_file(value if isinstance(value, str) else "")
        except ValueError as exc:
            raise ValidationError(f"{attr} {exc}") from None


def _known_format(name: str) -> bool:
    try:
        by_name(name)
    except KeyError:
        return False
    return True


class LoraEntrySchema(Schema):
    """One of an entry's `loras`: {"id", "path", "scale"}."""

    id = _id()
    path = _ModelFile(required=True, error_messages={"required": "path is required (a GGUF file)"})
    scale = _Exact((int, float), "scale must be a number from -100 to 100", lambda v: -100 <= v <= 100)

    @pre_load
    def an_object_of_known_keys(self, data: Any, **kwargs: Any) -> Any:
        if not isinstance(data, dict) or set(data) - set(self.fields):
            raise ValidationError('must be an object with "id", "path" and "scale"')
        return data

    @post_load
    def strip(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {"id": data["id"].strip(), "path": data["path"], "scale": float(data.get("scale", 1.0))}


class ModelEntrySchema(Schema):
    """One entry of LLM_MODELS; loads into the keyword arguments of a ModelSpec."""

    id = _id()
    path = _ModelFile(required=True, error_messages={"required": "path is required (a GGUF file)"})
    workers = _integer("workers", 0, 64)  # 0 only on demand, where it may be said
    n_ctx = _integer("n_ctx", 1, 1 << 20)
    parallel = _integer("parallel", 1, 256)
    chat_template = _Exact(str, "chat_template must be a string (a Jinja template)")
    chat_format = _Exact(str, f"chat_format must be one of {', '.join(FORMATS)}", _known_format)
    pooling = _choice("pooling", POOLINGS)
    embedding = _flag("embedding")
    cache_type_k = _choice("cache_type_k", KV_TYPES)
    cache_type_v = _choice("cache_type_v", KV_TYPES)
    spec_type = _choice("spec_type", SPEC_TYPES)
    spec_max = _integer("spec_max", 1, 256)
    draft = _ModelFile(allow_none=True)
    aliases = _Exact(
        list,
        "aliases must be a list of non-empty strings",
        lambda v: all(isinstance(a, str) and a.strip() for a in v),
    )
    load_at = _choice("load", LOADS)  # `load` would hide Schema.load
    ttl = _integer("ttl", 1, 7 * 86400)
    loras = fields.List(
        fields.Nested(LoraEntrySchema),
        error_messages={"invalid": 'loras must be a list of {{"id", "path", "scale"}}'},
    )
    swa_full = _flag("swa_full")
    ctx_checkpoints = _integer("ctx_checkpoints", 0, 256)
    mmproj = _ModelFile(allow_none=True)

    @pre_load
    def an_object_with_an_id(self, data: Any, **kwargs: Any) -> Any:
        if not isinstance(data, dict):
            raise ValidationError("must be an object")
        known = sorted(field.data_key or name for name, field in self.fields.items())
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ValidationError(f"unknown key {unknown[0]!r} (known: {', '.join(known)})")
        return data

    @validates_schema
    def on_demand_has_no_workers(self, data: dict[str, Any], **kwargs: Any) -> None:
        on_demand, workers = data.get("load_at") == "on_demand", data.get("workers")
        if workers == 0 and not on_demand:
            raise ValidationError("workers must be an integer from 1 to 64")
        if on_demand and workers:
            raise ValidationError("an on-demand entry has no workers of its own (LLM_ON_DEMAND_WORKERS)")
        if not on_demand and data.get("ttl") is not None:
            raise ValidationError('ttl applies only to an entry with "load": "on_demand"')
        taken: set[str] = set()
        for number, lora in enumerate(data.get("loras") or []):
            if lora["id"] in taken:
                raise ValidationError(f"loras[{number}]: the id {lora['id']!r} is taken")
            taken.add(lora["id"])

    @post_load
    def spec_arguments(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """What ModelSpec takes: a load becomes on_demand (with no workers), lists become tuples."""
        given = {key: value for key, value in data.items() if value is not None}
        on_demand = given.pop("load_at", "startup") == "on_demand"
        given["id"] = given["id"].strip()
        given["workers"] = 0 if on_demand else given.get("workers", 1)
        given["aliases"] = tuple(alias.strip() for alias in given.get("aliases", ()))
        given["loras"] = tuple(given.get("loras", ()))
        return {**given, "on_demand": on_demand}


def first_problem(errors: dict[str | int, Any] | list[Any] | str, within: str = "") -> str:
    """marshmallow's first error as one phrase: `loras[0] scale must be ...` (keys name themselves)."""
    if isinstance(errors, str):
        return f"{within} {errors}".strip()
    if isinstance(errors, list):
        return first_problem(errors[0], within)
    key, inner = next(iter(errors.items()))
    if isinstance(key, int):
        return first_problem(inner, f"{within}[{key}]")
    if isinstance(inner, dict) and inner and isinstance(next(iter(inner)), int):
        return first_problem(inner, f"{within}{key}")  # a list's items: `loras[0] ...`
    return first_problem(inner, within)
