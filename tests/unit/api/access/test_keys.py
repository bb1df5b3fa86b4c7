"""API keys on every route but the public ones (and optionally /metrics), through Flask's test client."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient

from app import create_app
from tests.unit.conftest import FakeEngine, make_config

CHAT = {"messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def keyed(engine: FakeEngine) -> FlaskClient:
    return create_app(make_config(LLM_API_KEYS="sk-one, sk-two"), engine=engine).test_client()


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer ", "Bearer sk-three", "Basic sk-one", "sk-one", "Bearer sk-on"],
)
def test_missing_or_wrong_key_is_401(keyed: FlaskClient, authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization is not None else {}
    for method, path, kwargs in [("post", "/v1/chat/completions", {"json": CHAT}), ("get", "/v1/models", {})]:
        response = getattr(keyed, method)(path, headers=headers, **kwargs)
        assert response.status_code == 401
        error = response.get_json()["error"]
        assert error["code"] == "invalid_api_key" and error["type"] == "invalid_request_error"
        assert "sk-" not in response.get_data(as_text=True)


def test_right_keys_pass_and_health_stays_public(keyed: FlaskClient) -> None:
    for key in ("sk-one", "sk-two"):
        assert keyed.get("/v1/models", headers={"Authorization": f"Bearer {key}"}).status_code == 200
    assert (
        keyed.post("/v1/chat/completions", json=CHAT, headers={"Authorization": "bearer sk-two"}).status_code
        == 200
    )
    assert keyed.get("/health").status_code == 200
    assert keyed.get("/metrics").status_code == 200
    assert keyed.get("/openapi.json").status_code == 200


def test_metrics_can_require_an_operators_key(engine: FakeEngine) -> None:
    # Every key's usage is in the figures: with LLM_METRICS_AUTH they are the operator's to read.
    config = make_config(LLM_API_KEYS="sk-one", LLM_ADMIN_KEYS="ops:sk-ops", LLM_METRICS_AUTH="1")
    client = create_app(config, engine=engine).test_client()
    for path in ("/metrics", "/health/workers"):
        assert client.get(path).status_code == 401
        tenant = client.get(path, headers={"Authorization": "Bearer sk-one"})
        assert tenant.status_code == 403 and tenant.get_json()["error"]["code"] == "operator_only"
        assert client.get(path, headers={"Authorization": "Bearer sk-ops"}).status_code == 200


def test_operator_routes_refuse_tenants_in_their_familys_shape(engine: FakeEngine) -> None:
    config = make_config(LLM_API_KEYS="alice:sk-alice", LLM_ADMIN_KEYS="ops:sk-ops")
    client = create_app(config, engine=engine).test_client()
    tenant, operator = {"Authorization": "Bearer sk-alice"}, {"Authorization": "Bearer sk-ops"}
    for path in ("/sleep", "/models/unload", "/v1/unload_lora_adapter", "/slots/0?action=erase", "/tools"):
        refused = client.post(path, json={}, headers=tenant)
        error = refused.get_json()["error"]
        assert refused.status_code == 403 and error["type"] == "permission_error", (path, error)
        assert error["code"] == "operator_only" and "LLM_ADMIN_KEYS" in error["message"]
        assert client.post(path, json={}, headers=operator).status_code != 403 or path == "/tools"
    unload = {"model": "test-model", "prompt": "", "keep_alive": 0}
    refused = client.post("/api/generate", json=unload, headers=tenant)
    assert refused.status_code == 403 and list(refused.get_json()) == ["error"]  # Ollama's shape
    assert client.post("/api/generate", json=unload, headers=operator).status_code == 200


def test_no_keys_means_open(client: FlaskClient) -> None:
    assert client.get("/v1/models").status_code == 200


PUBLIC = {"/", "/health", "/health/ready", "/status", "/openapi.json", "/api/version", "/metrics",
          "/health/workers"}  # fmt: skip


def test_every_route_but_the_public_ones_needs_a_key(keyed: FlaskClient) -> None:
    """Walks every route Flask serves, so a route added later cannot be left open by mistake."""
    checked = 0
    for rule in keyed.application.url_map.iter_rules():
        path = rule.rule.replace("<", "").replace(">", "").replace("path:", "")
        if rule.endpoint == "static" or path.startswith(("/docs", "/ui/")) or path in PUBLIC:
            continue
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            response = keyed.open(path, method=method, json={})
            assert response.status_code == 401, (method, path, response.status_code)
            checked += 1
    assert checked > 40  # /v1, Ollama's /api, llama-server's own routes
    for path in sorted(PUBLIC - {"/metrics", "/health/workers"}):
        assert keyed.get(path).status_code != 401, path


@pytest.mark.parametrize("path", ["/completion", "/completions", "/apply-template", "/props", "/slots"])
def test_llama_servers_own_routes_need_a_key(keyed: FlaskClient, path: str) -> None:
    method = keyed.get if path in ("/props", "/slots") else keyed.post
    assert method(path, json={}).status_code == 401
