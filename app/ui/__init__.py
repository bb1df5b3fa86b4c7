"""The browser pages: a chat page at `/` and an operators' status page at `/status`, over the public API."""

from __future__ import annotations

from flask import Blueprint, Response, render_template, request

from app.settings.current import current_config

bp = Blueprint("ui", __name__, template_folder="templates", static_folder="static", static_url_path="/ui")

# Everything the pages use ships with them: nothing may load from elsewhere, and no
# inline script may run, so HTML that slips into an answer could not act even if shown.
_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)


@bp.after_request
def _guard(response: Response) -> Response:
    response.headers.setdefault("Content-Security-Policy", _POLICY)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    return response


@bp.get("/")
def chat() -> str | Response:
    """The chat page: it talks to /v1/chat/completions like any client. A client that takes no HTML
    gets what Ollama answers at `/` (its clients check the server so)."""
    if not request.accept_mimetypes.accept_html:
        return Response("Ollama is running", mimetype="text/plain")
    config = current_config()
    return render_template("chat.html", keys_required=bool(config.api_keys))


@bp.get("/status")
def status() -> str:
    """Each worker, its model and its load, refreshed from /health/workers."""
    config = current_config()
    return render_template("status.html", keys_required=bool(config.api_keys) and config.metrics_auth)
