"""API keys: when configured, every route but a few public ones needs `Authorization: Bearer <key>`."""

from __future__ import annotations

import hmac

from flask import Flask, current_app, g, request

from app import workers
from app.api.http import roles
from app.api.http.errors import AuthenticationError
from app.serving import internal, relay
from app.settings.current import config_of, current_config
from app.settings.keys import ApiKey

# Every route needs the key but these (as llama-server keeps a short public list): a route
# added later is protected unless it is named here. The pages ask for the key and send it.
_PUBLIC = ("/", "/health", "/health/ready", "/status", "/openapi.json", "/api/version")
_PUBLIC_UNDER = ("/docs/", "/ui/")  # Swagger UI's and the pages' static files
_FIGURES = ("/metrics", "/health/workers")  # need a key only with LLM_METRICS_AUTH=1


def _public(path: str, metrics_auth: bool) -> bool:
    return (
        path in _PUBLIC
        or path == "/docs"
        or path.startswith(_PUBLIC_UNDER)
        or (path in _FIGURES and not metrics_auth)
    )


def _matching_key(presented: str, keys: tuple[tuple[bytes, ApiKey], ...]) -> ApiKey | None:
    # Compare with every key, in constant time, so neither a key nor its position leaks.
    candidate = presented.encode()
    found = None
    for secret, key in keys:
        if hmac.compare_digest(candidate, secret):
            found = key
    return found


def _require_key() -> None:
    config = current_config()
    keys: tuple[tuple[bytes, ApiKey], ...] = current_app.extensions["api_keys"]
    if not keys or _public(request.path, config.metrics_auth) or request.method == "OPTIONS":
        # (CORS preflights carry no key.)
        return
    call = internal.of(request.environ)
    if call is not None:  # a batch line: its batch's key was checked when the batch was created
        if call.key is not None:
            g.api_key = call.key
            g.stats.key_name = call.key.name
        return
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        presented = request.headers.get("X-Api-Key", "")  # Anthropic's clients send it this way
    if not presented.strip():
        raise AuthenticationError("Missing API key: send it as 'Authorization: Bearer <key>' or 'x-api-key'.")
    key = _matching_key(presented.strip(), keys)
    if key is None:
        # Never echo the key: it would land in client logs and ours.
        raise AuthenticationError("Incorrect API key provided.")
    g.api_key = key
    g.stats.key_name = key.name  # the access log and the metrics name the key, never show it
    if relay.is_relayed(request, workers.this_worker()):
        return  # a peer's order (a load for a tenant's request, a relayed sleep): the peer checked
    figures = request.path in _FIGURES  # (public unless LLM_METRICS_AUTH: here, they need a key)
    roles.check(key, figures or roles.is_operator_route(current_app, request.endpoint), request.path)


def init_app(app: Flask) -> None:
    """Check keys before any /v1 view runs."""
    app.extensions["api_keys"] = tuple((key.key.encode(), key) for key in config_of(app).api_keys)
    app.before_request(_require_key)
