"""Operators and tenants: the routes that change what every tenant gets are the operator's.

A key in LLM_ADMIN_KEYS is an operator's; one in LLM_API_KEYS or its file, a tenant's. A view
that puts models to sleep, loads or unloads them or their adapters, sets adapter scales, acts on
slots or calls the operator's MCP tools is declared `@operator_route`: a tenant's key gets a 403
there, in the route's own error shape. So do the figures (/metrics, /health/workers) when
LLM_METRICS_AUTH asks for a key: every key's usage is in them. A server without keys has no
tenants to tell apart, and stays open as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from flask import Flask, g

from app.api.http.errors import PermissionDeniedError
from app.settings.keys import ApiKey

View = TypeVar("View", bound=Callable[..., Any])
_DECLARED = "operator_route"


def operator_route(view: View) -> View:
    """Declare a view the operator's: tenants' keys are refused it."""
    setattr(view, _DECLARED, True)
    return view


def is_operator_route(app: Flask, endpoint: str | None) -> bool:
    """Whether the view behind `endpoint` is declared the operator's."""
    view = app.view_functions.get(endpoint or "")
    return bool(getattr(view, _DECLARED, False))


def check(key: ApiKey, operators_only: bool, what: str) -> None:
    """Refuse a tenant's key where only operators may go; `what` names the route in the message."""
    if operators_only and not key.operator:
        raise PermissionDeniedError(
            f"{what} is for operators: this API key is a tenant's (operators' keys are in LLM_ADMIN_KEYS).",
            code="operator_only",
        )


def tenant() -> bool:
    """Whether the request being served comes with a tenant's key (not an operator's, and not a
    server without keys)."""
    key = g.get("api_key")
    return key is not None and not key.operator
