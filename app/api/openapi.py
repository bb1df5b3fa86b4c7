"""The OpenAPI 3.1 document: each family's own paths over the shared components, served with Swagger UI.

apispec builds it from the very marshmallow schemas that validate the requests.
"""

from __future__ import annotations

from typing import Any

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from flask import Blueprint, Flask, Response, current_app, jsonify
from flask_swagger_ui import get_swaggerui_blueprint
from marshmallow import fields

from app.api.families import FAMILIES
from app.api.http.openapi import add_shared_components
from app.settings.current import current_config
from app.settings.models import ModelSpec

bp = Blueprint("openapi", __name__)

DOCUMENT_PATH, DOCS_PATH = "/openapi.json", "/docs"


def _own_description(converter: Any, field: fields.Field[Any], ret: dict[str, Any]) -> dict[str, Any]:
    """Fields that take more than one JSON type describe themselves (their OPENAPI, or metadata)."""
    return dict(field.metadata.get("openapi") or getattr(field, "OPENAPI", {}))


def build_document(models: tuple[ModelSpec, ...]) -> dict[str, Any]:
    """The whole document, as a dict."""
    served = ", ".join(f"`{spec.id}`" + (" (embeddings)" if spec.embedding else "") for spec in models)
    plugin = MarshmallowPlugin()
    spec = APISpec(
        title="llm-server",
        version="1.0.0",
        openapi_version="3.1.0",
        info={"description": f"An OpenAI-compatible API serving the llama.cpp models {served}."},
        plugins=[plugin],
    )
    assert plugin.converter is not None  # set by APISpec as it takes the plugin
    plugin.converter.add_attribute_function(_own_description)
    add_shared_components(spec)
    for family in FAMILIES:
        family.document.describe(spec, models)
    return spec.to_dict()


@bp.get(DOCUMENT_PATH)
def openapi_document() -> Response:
    """This API's OpenAPI 3.1 document."""
    document = current_app.extensions.get("openapi")
    if document is None:
        document = current_app.extensions["openapi"] = build_document(current_config().models)
    return jsonify(document)


def init_app(app: Flask) -> None:
    """Serve the document and Swagger UI, whose assets come from the flask-swagger-ui wheel."""
    app.register_blueprint(bp)
    # validatorUrl None: Swagger UI would otherwise fetch a badge from the internet.
    docs = get_swaggerui_blueprint(
        DOCS_PATH, DOCUMENT_PATH, config={"app_name": "llm-server API", "validatorUrl": None}
    )
    app.register_blueprint(docs)
