"""llama-server's router orders served: a model loaded (once a worker holds it ready) or unloaded
from every pool worker holding it, and a model's LoRA adapters listed or their global scales set
on every worker holding it. A relayed order (another worker's) acts on this worker itself."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from flask import Response, jsonify, request

from app.api.generation.planning import adapter_scales
from app.api.http import shown
from app.api.http.body import generating_engine, json_array, model_index, parse_json
from app.api.http.errors import InvalidRequestError, ModelBusyError, ServiceUnavailableError
from app.api.model_admin.schemas import lora_list_schema, model_order_schema
from app.api.requests.generation import AdapterScale
from app.api.routing import orders, pool, waking
from app.serving import global_scales
from app.serving.model_holder import Busy, LoadFailed
from app.settings.current import current_config


def loaded() -> Response:
    """Load an on-demand model (if no worker holds it); `{"success": true}` once it is ready."""
    index = model_index(parse_json(model_order_schema)["model"])
    if current_config().models[index].on_demand:
        if orders.relayed():
            try:
                pool.load_here(index)
            except Busy as exc:
                raise ModelBusyError(f"This worker cannot load it now: {exc}.") from None
            except LoadFailed as exc:
                model = current_config().models[index].id
                raise ServiceUnavailableError(f"The model '{model}' could not be loaded: {exc}") from None
        else:
            pool.load(index)
    return jsonify({"success": True})


def unloaded() -> Response:
    """Unload an on-demand model from every worker holding it; a 409 if one serves requests."""
    index = model_index(parse_json(model_order_schema)["model"])
    spec = current_config().models[index]
    if not spec.on_demand:
        raise InvalidRequestError(
            f"The model '{spec.id}' is loaded at start-up on workers of its own; only entries with "
            '"load": "on_demand" unload.',
            param="model",
        )
    if orders.relayed():
        if not pool.unload_here(index):
            raise ModelBusyError(f"The model '{spec.id}' serves requests on this worker.")
        return jsonify({"success": True})
    busy = orders.unload(index)
    if busy:
        raise ModelBusyError(
            f"The model '{spec.id}' serves requests on {len(busy)} worker(s); unload it once they are done."
        )
    return jsonify({"success": True})


def adapters_listed() -> Response:
    """llama-server's list of a model's LoRA adapters (`?model=`, else the first generating model):
    each with its index (`id`), name, path and global scale."""
    engine = generating_engine()
    spec = current_config().model
    engine.adopt_adapters(spec.loras)  # those loaded at run time since its last request
    scales = engine.lora_scales
    return jsonify(
        [
            {
                "id": n,
                "name": lora.id,
                "path": shown.file_path(lora.path),
                "scale": scales[n] if n < len(scales) else 0.0,
            }
            for n, lora in spec.live_adapters()
        ]
    )


def scales_set() -> Response:
    """Set a model's global LoRA scales (llama-server's: a list of {id, scale}; those left out: 0),
    on every worker holding it."""
    body = json_array('{"id", "scale"}')
    asked: list[dict[str, Any]] = lora_list_schema.load(body)
    config = current_config()
    index = model_index(request.args.get("model"), "generate")
    scales = adapter_scales([AdapterScale(e["id"], e["scale"]) for e in asked], config.models[index])
    assert scales is not None, "a list was given"
    if orders.relayed():  # another worker's order: this worker holds the model
        if index != config.model_index:
            raise ServiceUnavailableError("This worker no longer holds that model; retry shortly.")
        _scale_here(scales)
        return jsonify({"success": True})
    model = config.models[index].id
    holders = [p for p in pool.holding(index) if p.ready]
    if not holders:
        raise ServiceUnavailableError(f"No worker holding '{model}' is ready; retry shortly.")
    # Saved first: a worker starting the model meanwhile reads them; the holders are told next.
    global_scales.save(config.models[index], list(scales), pool.table())
    path = f"/lora-adapters?model={quote(model)}"
    refused = orders.each(holders, path, body, lambda: _scale_here(scales))
    if refused:
        raise ServiceUnavailableError(f"Worker(s) {refused} did not take the scales; retry shortly.")
    return jsonify({"success": True})


def _scale_here(scales: Sequence[float]) -> bool:
    """This worker's engine takes the scales now; a sleeping model reads them (saved) when it wakes."""
    mine = waking.sleeper()
    if mine is None or not mine.asleep:
        generating_engine().lora_scales = list(scales)
    return True
