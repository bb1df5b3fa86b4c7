"""API keys: when configured, the API routes (and optionally /metrics) need `Authorization: Bearer <key>`."""

from __future__ import annotations

import hmac

from flask import Flask, current_app, request

from app.api.errors import AuthenticationError

# Outside /v1 but reading the model: protected like it (llama.cpp's server does the same).
_ALSO_PROTECTED = ("/tokenize", "/detokenize", "/tokenizer_info")
_FIGURES = ("/metrics", "/health/workers")  # need a key only with LLM_METRICS_AUTH=1


def _key_matches(presented: str, keys: tuple[bytes, ...]) -> bool:
    # Compare with every key, in constant time, so neither a key nor its position leaks.
    candidate = presented.encode()
    return sum(hmac.compare_digest(candidate, key) for key in keys) > 0


def _require_key() -> None:
    config = current_app.config["LLM"]
    keys: tuple[bytes, ...] = current_app.extensions["api_keys"]
    protected = (
        request.path.startswith("/v1/")
        or request.path in _ALSO_PROTECTED
        or (request.path in _FIGURES and config.metrics_auth)
    )
    if not keys or not protected or request.method == "OPTIONS":  # CORS preflights carry no key
        return
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        presented = request.headers.get("X-Api-Key", "")  # Anthropic's clients send it this way
    if not presented.strip():
        raise AuthenticationError("Missing API key: send it as 'Authorization: Bearer <key>' or 'x-api-key'.")
    if not _key_matches(presented.strip(), keys):
        # Never echo the key: it would land in client logs and ours.
        raise AuthenticationError("Incorrect API key provided.")


def init_app(app: Flask) -> None:
    """Check keys before any /v1 view runs."""
    app.extensions["api_keys"] = tuple(key.encode() for key in app.config["LLM"].api_keys)
    app.before_request(_require_key)
