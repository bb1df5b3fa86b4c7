"""Check answers against the providers' own published schemas, not ours.

OpenAI: the schemas of its OpenAPI document (github.com/openai/openai-openapi), the subset
kept in tests/schemas/openai-subset.json. Anthropic publishes its API reference through
its SDK's generated types: a Message or stream event must validate as the anthropic
package's pydantic model, with no field the model does not know.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pydantic
from referencing import Registry
from referencing.jsonschema import DRAFT202012

SUBSET = Path(__file__).resolve().parents[1] / "schemas" / "openai-subset.json"


def _nullable_as_null(node: Any) -> Any:
    """OpenAI's document is OpenAPI 3.1 but keeps a few 3.0 `nullable: true` marks; JSON Schema 2020-12
    ignores them, so they are spelled out as what they mean: this, or null."""
    if isinstance(node, list):
        return [_nullable_as_null(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _nullable_as_null(value) for key, value in node.items()}
    if node.pop("nullable", False) is True:
        return {"anyOf": [node, {"type": "null"}]}
    return node


@cache
def _openai_validator(name: str) -> jsonschema.Draft202012Validator:
    document = _nullable_as_null(json.loads(SUBSET.read_text()))
    registry = Registry().with_resource("urn:openai", DRAFT202012.create_resource(document))
    return jsonschema.Draft202012Validator(
        {"$ref": f"urn:openai#/components/schemas/{name}"}, registry=registry
    )


def check_openai(instance: Any, name: str) -> None:
    """Fail with every violation if `instance` is not a valid OpenAI `name` (e.g. Response)."""
    errors = sorted(_openai_validator(name).iter_errors(instance), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10]) + f"\n{instance}"


def check_anthropic(instance: dict[str, Any], model: Any) -> None:
    """Fail if `instance` does not validate as the anthropic SDK's `model` type, or carries unknown fields."""
    parsed = pydantic.TypeAdapter(model).validate_python(instance)
    unknown = list(_extra_fields(parsed, ""))
    assert not unknown, f"fields Anthropic's types do not have: {unknown}\n{instance}"


def _extra_fields(value: Any, where: str) -> Any:
    if isinstance(value, pydantic.BaseModel):
        for key in value.model_extra or {}:
            yield f"{where}.{key}"
        for key in type(value).model_fields:
            yield from _extra_fields(getattr(value, key), f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _extra_fields(item, f"{where}[{index}]")
