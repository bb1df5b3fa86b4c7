"""What the security matrix needs: the app's own routes (its url_map), and the checks on every error.

The routes come from the app factory itself, so a route added later is in the matrix without
anyone remembering to add it; a new kind of path parameter fails the matrix until it is given a
value here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import httpx

from app import create_app
from app.api.http import roles
from tests.unit.conftest import FakeEngine, make_config

# Routes that answer without a key (keys.py's public list; /metrics and /health/workers without
# LLM_METRICS_AUTH), and the pages' files.
PUBLIC = {"/", "/health", "/health/ready", "/status", "/openapi.json", "/api/version", "/metrics",
          "/health/workers"}  # fmt: skip
PUBLIC_UNDER = ("/docs", "/ui/")
# What may never be in an error a client reads: a traceback, a Python repr, a path on the server,
# a memory address.
LEAKS = re.compile(
    r"Traceback|File \"|site-packages|\.py\b|/work/|/tmp/|/root/|/home/|/usr/|/var/| object at |"
    r"0x[0-9a-fA-F]{8,}|<class '|<function |Error\(|\bself\b"
)


@dataclass(frozen=True)
class Route:
    """One method of one served route, its parameters filled with `ids` (unknown ones: a missing id)."""

    method: str
    rule: str
    endpoint: str
    operator: bool = False  # declared the operator's (@operator_route): tenants' keys get a 403

    @property
    def public(self) -> bool:
        return self.rule in PUBLIC or self.rule.startswith(PUBLIC_UNDER)

    @property
    def family(self) -> str:
        """Whose error shape the route answers in."""
        if self.rule.startswith("/v1/messages"):
            return "anthropic"
        return "ollama" if self.rule.startswith("/api/") else "openai"

    def path(self, ids: dict[str, str] | None = None) -> str:
        given = {"id_slot": "0", "model_id": "no-such-model", "path": "index.html", "filename": "app.js"}
        given.update(ids or {})

        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in given:
                return given[name]
            if name.endswith("_id"):
                return f"{name.removesuffix('_id')}_missing0123"
            raise AssertionError(f"the security matrix has no value for <{name}> in {self.rule}: add one")

        return re.sub(r"<(?:[^<>:]+:)?([^<>]+)>", value, self.rule)


def served_routes() -> list[Route]:
    """Every (method, route) the app serves, from its url_map (HEAD and OPTIONS aside)."""
    app = create_app(make_config(LLM_API_KEYS="matrix:sk-matrix"), engine=FakeEngine())
    routes = [
        Route(method, rule.rule, rule.endpoint, roles.is_operator_route(app, rule.endpoint))
        for rule in app.url_map.iter_rules()
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"})
    ]
    return sorted(routes, key=lambda r: (r.rule, r.method))


def error_in_shape(route: Route, answer: httpx.Response) -> None:
    """`answer` is an error in its route's protocol's shape, with nothing of the server's insides."""
    assert answer.status_code >= 400, (route, answer.status_code)
    assert answer.status_code != 500 or False, (route, answer.text[:300])
    text = answer.text
    assert not LEAKS.search(text), (route.method, route.rule, answer.status_code, text[:400])
    body = json.loads(text)
    if route.family == "anthropic":
        assert body["type"] == "error" and isinstance(body["error"]["message"], str), (route, body)
    elif route.family == "ollama":
        assert isinstance(body["error"], str) and body["error"], (route, body)
    else:
        assert isinstance(body["error"]["message"], str) and body["error"]["message"], (route, body)
        assert isinstance(body["error"]["type"], str), (route, body)


def clean(route: Route, answer: httpx.Response, case: str = "") -> None:
    """Any answer: never a 500, and an error never shows the server's insides."""
    what = (route.method, route.rule, case, answer.status_code, answer.text[:400])
    assert answer.status_code != 500, what
    if answer.status_code >= 400:
        assert not LEAKS.search(answer.text), what


def send(client: httpx.Client, route: Route, path: str, **kwargs: Any) -> httpx.Response:
    return client.request(route.method, path, **kwargs)
