"""`POST /models/load` and `POST /models/unload` (llama-server's router mode): on-demand models, by hand.

Loading waits until a worker holds the model ready (as a request for it would); unloading
frees it from every pool worker holding it, unless one serves requests (a 409). Entries
loaded at start-up hold their workers for good: loading one is already done, unloading
one is refused. A relayed order (another worker's) acts on this worker itself.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request

from app.api.common import on_demand
from app.api.common.body import model_index, parse_json
from app.api.common.errors import InvalidRequestError, ModelBusyError, ServiceUnavailableError
from app.api.models.schemas import model_order_schema
from app.serving import relay
from app.serving.model_holder import Busy, LoadFailed
from app.settings.current import current_config

bp = Blueprint("models", __name__)


@bp.post("/models/load")
def load() -> Response:
    """Load an on-demand model (if no worker holds it); `{"success": true}` once it is ready."""
    index = model_index(parse_json(model_order_schema)["model"])
    if current_config().models[index].on_demand:
        if relay.is_relayed(request):
            try:
                on_demand.load_here(index)
            except Busy as exc:
                raise ModelBusyError(f"This worker cannot load it now: {exc}.") from None
            except LoadFailed as exc:
                model = current_config().models[index].id
                raise ServiceUnavailableError(f"The model '{model}' could not be loaded: {exc}") from None
        else:
            on_demand.load(index)
    return jsonify({"success": True})


@bp.post("/models/unload")
def unload() -> Response:
    """Unload an on-demand model from every worker holding it; a 409 if one serves requests."""
    index = model_index(parse_json(model_order_schema)["model"])
    spec = current_config().models[index]
    if not spec.on_demand:
        raise InvalidRequestError(
            f"The model '{spec.id}' is loaded at start-up on workers of its own; only entries with "
            '"load": "on_demand" unload.',
            param="model",
        )
    if relay.is_relayed(request):
        mine = on_demand.holder()
        if mine is not None and mine.index == index and not mine.unload("request"):
            raise ModelBusyError(f"The model '{spec.id}' serves requests on this worker.")
        return jsonify({"success": True})
    busy = on_demand.unload(index)
    if busy:
        raise ModelBusyError(
            f"The model '{spec.id}' serves requests on {len(busy)} worker(s); unload it once they are done."
        )
    return jsonify({"success": True})
