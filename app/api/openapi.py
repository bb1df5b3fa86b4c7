"""The OpenAPI 3.1 document, built from the app's routes, served with Swagger UI.

Each route's view declares its operation (`documented`, app/api/http/openapi.py); its path,
methods and path parameters come from the route itself. apispec turns the components each
family registers (the very marshmallow schemas that validate the requests) into JSON Schema.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from flask import Blueprint, Flask, Response, current_app, jsonify
from flask_swagger_ui import get_swaggerui_blueprint
from marshmallow import fields

from app.api.families import FAMILIES
from app.api.http.openapi import SHARED, add_components, declared
from app.settings.config import Config
from app.settings.current import config_of, install

bp = Blueprint("openapi", __name__)

DOCUMENT_PATH, DOCS_PATH = "/openapi.json", "/docs"


def _own_description(converter: Any, field: fields.Field[Any], ret: dict[str, Any]) -> dict[str, Any]:
    """Fields that take more than one JSON type describe themselves (their OPENAPI, or metadata)."""
    return dict(field.metadata.get("openapi") or getattr(field, "OPENAPI", {}))


# Served but not API operations, as in vLLM's document: the document itself and its Swagger UI
# page, the browser pages, and Prometheus' scrape.
NOT_API = ("openapi", "swagger_ui", "ui", "metrics", "static")


class UndocumentedRouteError(RuntimeError):
    """A family's route whose view declares no operation: the app does not start with one."""


def operations(app: Flask) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(path, method, operation) for every API route, in the order the routes were registered."""
    for rule in app.url_map.iter_rules():
        described = declared(app.view_functions[rule.endpoint])
        if described is None:
            if rule.endpoint.split(".")[0] in NOT_API:
                continue
            raise UndocumentedRouteError(
                f"{rule.rule} ({rule.endpoint}) declares no OpenAPI operation: decorate its view with "
                "@documented (app/api/http/openapi.py)."
            )
        path = re.sub(r"<(?:[^<>:]+:)?([^<>]+)>", r"{\1}", rule.rule)  # Flask's <path:id> is OpenAPI's {id}
        described = copy.deepcopy(described)  # apispec resolves references in place
        named = {parameter["name"] for parameter in described.get("parameters", ())}
        arguments = [name for name in re.findall(r"{([^{}]+)}", path) if name not in named]
        if arguments:
            required = {"in": "path", "required": True, "schema": {"type": "string"}}
            described["parameters"] = [{"name": name, **required} for name in arguments] + [
                *described.get("parameters", ())
            ]
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            yield path, method.lower(), described


def check_documented(app: Flask) -> None:
    """Stop start-up at a family's route that declares no operation (UndocumentedRouteError)."""
    for _ in operations(app):
        pass


def build_document(app: Flask) -> dict[str, Any]:
    """The whole document of `app`'s routes, as a dict."""
    models = config_of(app).models
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
    add_components(spec, SHARED)
    for family in FAMILIES:
        add_components(spec, family.document.COMPONENTS)
        # A family whose clients must name a model: its request names the served ones, by use.
        for name, use in getattr(family.document, "MODEL_NAMES", {}).items():
            if ids := [model.id for model in models if use == "any" or (use == "embed") == model.embedding]:
                spec.components.schemas[name]["properties"]["model"]["enum"] = ids
    for path, method, described in operations(app):
        spec.path(path=path, operations={method: described})
    return spec.to_dict()


def document_of(config: Config) -> dict[str, Any]:
    """The document a server on `config` serves, from its families' routes alone (no model, no
    worker): what the documentation site renders."""
    app = Flask(__name__)
    install(app, config)
    for family in FAMILIES:
        app.register_blueprint(family.routes.bp)
    return build_document(app)


@bp.get(DOCUMENT_PATH)
def openapi_document() -> Response:
    """This API's OpenAPI 3.1 document."""
    document = current_app.extensions.get("openapi")
    if document is None:
        document = current_app.extensions["openapi"] = build_document(current_app)
    return jsonify(document)


def init_app(app: Flask) -> None:
    """Serve the document and Swagger UI, whose assets come from the flask-swagger-ui wheel."""
    app.register_blueprint(bp)
    # validatorUrl None: Swagger UI would otherwise fetch a badge from the internet.
    docs = get_swaggerui_blueprint(
        DOCS_PATH, DOCUMENT_PATH, config={"app_name": "llm-server API", "validatorUrl": None}
    )
    app.register_blueprint(docs)
