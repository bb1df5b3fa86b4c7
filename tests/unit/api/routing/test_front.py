"""The front: which worker serves a request is decided from its `model` before the view runs."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from app.api.routing.front import Routing
from tests.unit.conftest import FakeEngine

# Routes whose request names a model but that no one worker serves: model orders and adapter
# scales act on every worker holding a model, and /api/show answers from the settings.
NOT_ROUTED = {
    ("/models/load", "post"),
    ("/models/unload", "post"),
    ("/lora-adapters", "post"),
    ("/api/show", "post"),
}


def _names_a_model(operation: dict[str, Any], schemas: dict[str, Any]) -> bool:
    if any(p["name"] == "model" and p["in"] == "query" for p in operation.get("parameters", ())):
        return True
    for content in operation.get("requestBody", {}).get("content", {}).values():
        schema = content["schema"]
        if "$ref" in schema:
            schema = schemas[schema["$ref"].rsplit("/", 1)[1]]
        if "model" in schema.get("properties", {}):
            return True
    return False


def test_every_route_whose_request_names_a_model_is_routed_before_its_view(
    app: Flask, client: FlaskClient
) -> None:
    document = client.get("/openapi.json").get_json()
    schemas = document["components"]["schemas"]
    routed = set()
    for rule in app.url_map.iter_rules():
        routing = getattr(app.view_functions[rule.endpoint], "routing", None)
        if isinstance(routing, Routing):
            path = rule.rule.replace("<int:id_slot>", "{id_slot}")
            routed |= {(path, m.lower()) for m in rule.methods or () if m not in ("HEAD", "OPTIONS")}
    naming = {
        (path, method)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if _names_a_model(operation, schemas)
    }
    assert naming - NOT_ROUTED <= routed, "names a model, not routed"
    assert len(routed) >= 25 and ("/v1/chat/completions", "post") in routed


@pytest.mark.parametrize(
    ("path", "body", "error"),
    [
        # The unknown model is answered before the view's schema sees the bad field, each in its shape.
        ("/v1/chat/completions", {"model": "nope", "messages": "not a list"}, "model_not_found"),
        ("/v1/messages", {"model": "nope", "max_tokens": -1, "messages": []}, "not_found_error"),
        ("/api/chat", {"model": "nope", "messages": [{"role": "user", "content": 7}]}, '{"error":"The model'),
    ],
)
def test_an_unknown_model_is_refused_in_front_of_the_view(
    client: FlaskClient, engine: FakeEngine, path: str, body: dict[str, Any], error: str
) -> None:
    response = client.post(path, json=body)
    assert response.status_code == 404
    assert error in response.get_data(as_text=True)
    assert engine.plans == []


def test_what_the_front_cannot_read_is_left_to_the_view(client: FlaskClient, engine: FakeEngine) -> None:
    # A model that is no string, and a body that is no JSON: the view's schema refuses them (400).
    typed = client.post(
        "/v1/chat/completions", json={"model": 7, "messages": [{"role": "user", "content": "hi"}]}
    )
    assert typed.status_code == 400 and typed.get_json()["error"]["param"] == "model"
    broken = client.post("/v1/chat/completions", data="{not json", content_type="application/json")
    assert broken.status_code == 400 and "not valid JSON" in broken.get_json()["error"]["message"]
    deep = client.post("/v1/chat/completions", data="[" * 100_000, content_type="application/json")
    assert deep.status_code in (400, 413) and "Traceback" not in deep.get_data(as_text=True)
    # Ollama's load idiom (nothing to answer) is answered by whichever worker takes it, unrouted.
    loaded = client.post("/api/generate", json={"model": "test-model"})
    assert loaded.status_code == 200 and loaded.get_json()["done_reason"] == "load"
    assert engine.plans == []
