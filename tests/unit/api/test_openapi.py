"""The OpenAPI document and the docs page, through Flask's test client."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from flask import Blueprint, Flask
from flask.testing import FlaskClient
from openapi_spec_validator import validate

from app import create_app
from app.api import families
from app.api.families import Family
from app.api.openapi import UndocumentedRouteError

GENERATION_PATHS = ["/v1/chat/completions", "/v1/completions"]


def test_document_is_valid_openapi_3_1(client: FlaskClient) -> None:
    document = client.get("/openapi.json").get_json()
    assert document["openapi"] == "3.1.0"
    validate(document)


def test_completions_declare_json_and_event_stream(client: FlaskClient) -> None:
    document = client.get("/openapi.json").get_json()
    schemas = document["components"]["schemas"]
    for path in GENERATION_PATHS:
        operation = document["paths"][path]["post"]
        ok = operation["responses"]["200"]
        assert set(ok["content"]) == {"application/json", "text/event-stream"}
        assert "data: [DONE]" in ok["description"] and "include_usage" in ok["description"]
        event = schemas[ok["content"]["text/event-stream"]["schema"]["$ref"].rsplit("/", 1)[1]]
        chunk_ref = event["properties"]["data"]["anyOf"][0]["contentSchema"]["$ref"]
        assert chunk_ref.endswith("Chunk")
        assert set(operation["responses"]) == {"200", "400", "401", "404", "406", "413", "429", "500", "503"}
        assert operation["responses"]["429"]["headers"]["Retry-After"]


def test_request_bounds_come_from_the_validating_schemas(client: FlaskClient) -> None:
    schemas = client.get("/openapi.json").get_json()["components"]["schemas"]
    chat = schemas["ChatCompletionRequest"]
    assert chat["required"] == ["messages"]
    assert chat["properties"]["temperature"]["maximum"] == 2.0
    assert chat["properties"]["messages"]["minItems"] == 1
    assert chat["properties"]["stop"]["anyOf"][1]["maxItems"] == 4
    assert "prompt" in schemas["CompletionRequest"]["required"]


def test_docs_page_is_served_with_local_assets(client: FlaskClient) -> None:
    page = client.get("/docs/")
    assert page.status_code == 200 and page.mimetype == "text/html"
    html = page.get_data(as_text=True)
    assert '"url": "/openapi.json"' in html and '"validatorUrl": null' in html
    # Nothing from the network: the only absolute URL is this server's own.
    assert all(url.startswith("http://localhost/") for url in re.findall(r"https?://[^\s\"']+", html))
    for asset in ("swagger-ui-bundle.js", "swagger-ui-standalone-preset.js", "swagger-ui.css"):
        assert f"/docs/{asset}" in html
        response = client.get(f"/docs/{asset}")
        assert response.status_code == 200 and len(response.get_data()) > 10_000
        response.close()


# Served but not API operations, as in vLLM's document: the document itself and its Swagger UI
# page, the browser pages, and Prometheus' scrape.
NOT_API = ("openapi", "swagger_ui", "ui", "metrics")
METHODS = {"get", "post", "put", "patch", "delete"}


def test_every_route_is_documented_and_every_documented_route_is_served(
    app: Flask, client: FlaskClient
) -> None:
    served = set()
    for rule in app.url_map.iter_rules():
        if rule.endpoint.split(".")[0] in NOT_API:
            continue
        path = re.sub(r"<(?:[^<>:]+:)?([^<>]+)>", r"{\1}", rule.rule)  # Flask's <path:id> is OpenAPI's {id}
        served |= {
            (path, method.lower()) for method in rule.methods or () if method not in ("HEAD", "OPTIONS")
        }
    document = client.get("/openapi.json").get_json()
    documented = {
        (path, method) for path, item in document["paths"].items() for method in item if method in METHODS
    }
    assert served - documented == set(), "served, not documented"
    assert documented - served == set(), "documented, not served"
    assert ("/v1/chat/completions", "post") in served and ("/v1/models/{model_id}", "get") in served


def test_a_family_route_without_an_operation_stops_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.unit.conftest import FakeEngine, make_config

    extra = Blueprint("extra", __name__)

    @extra.get("/v1/undocumented")
    def undocumented() -> str:
        return "never served"

    family = Family(SimpleNamespace(bp=extra), SimpleNamespace(components=lambda spec, models: None))  # type: ignore[arg-type]
    monkeypatch.setattr("app.api.FAMILIES", (*families.FAMILIES, family))
    with pytest.raises(UndocumentedRouteError, match=r"/v1/undocumented \(extra.undocumented\)"):
        create_app(make_config(), engine=FakeEngine())


def test_paths_methods_and_path_parameters_come_from_the_routes(client: FlaskClient) -> None:
    paths = client.get("/openapi.json").get_json()["paths"]
    item = paths["/v1/conversations/{conversation_id}/items/{item_id}"]
    assert set(item) == {"get", "delete"}
    for operation in item.values():
        named = [(p["name"], p["in"], p["required"]) for p in operation["parameters"]]
        assert named[:2] == [("conversation_id", "path", True), ("item_id", "path", True)]
    # Declared path parameters are kept as declared (an integer slot id), not repeated.
    (slot,) = [p for p in paths["/slots/{id_slot}"]["post"]["parameters"] if p["in"] == "path"]
    assert slot["schema"] == {"type": "integer", "minimum": 0}
    # One view at several paths is one operation at each.
    rerank = {path: paths[path]["post"]["summary"] for path in ("/v1/rerank", "/rerank", "/reranking")}
    assert len(set(rerank.values())) == 1 and "Rank documents" in rerank["/rerank"]
