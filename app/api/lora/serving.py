"""vLLM's run-time LoRA adapters served: a load checked where the base model is held (a file of
LLM_LORA_DIRS that llama.cpp loads as an adapter of that model), then written to the server's
adapter file for every worker of the model; an unload written there too."""

from __future__ import annotations

from collections.abc import Sequence

import gevent
from flask import Response, current_app

from app.api.http.body import generating_engine, model_index, parse_json
from app.api.http.errors import (
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
    ServiceUnavailableError,
)
from app.api.lora.schemas import load_adapter_schema, unload_adapter_schema
from app.engine.engine import Engine
from app.serving import runtime_adapters
from app.serving.runtime_adapters import Entry, Registry
from app.settings.current import current_config
from app.settings.models import LoraSpec, ModelSpec


def loaded() -> Response:
    """Load a LoRA adapter file under `lora_name`, on every worker of the base model (`model`)."""
    body = parse_json(load_adapter_schema)
    name, asked = body["lora_name"], body["lora_path"]
    config = current_config()
    try:
        path = runtime_adapters.allowed_path(config.lora_dirs, asked)
    except PermissionError as exc:
        raise PermissionDeniedError(f"lora_path: {exc}.", param="lora_path") from None
    except FileNotFoundError as exc:
        raise InvalidRequestError(f"lora_path: {exc}.", param="lora_path") from None
    index = model_index(body.get("model"), "generate")
    spec = config.models[index]
    if spec.embedding:
        raise InvalidRequestError(f"The model '{spec.id}' is an embedding model: it takes no LoRA adapters.")
    _check_name(config.models, name, spec, body["load_inplace"])
    _load_here(current_config().model, name, path, body["load_inplace"], asked)
    return _text(f"Success: LoRA adapter '{name}' added successfully.")


def unloaded() -> Response:
    """Unload the LoRA adapter named `lora_name` (loaded at run time or by LLM_MODELS) from its model."""
    name = parse_json(unload_adapter_schema)["lora_name"]
    held = [spec for spec in current_config().models if spec.adapter_named(name) is not None]
    if not held or not _registry().change(
        held[0], lambda entry: runtime_adapters.remove(entry, held[0], name)
    ):
        raise NotFoundError(f"The lora adapter '{name}' cannot be found.", param="lora_name")
    if current_config().model.id == held[0].id:
        _adopt_now(
            current_app.extensions["engine"], current_config().model.loras
        )  # freed here at once; the others before their next request
    return _text(f"Success: LoRA adapter '{name}' removed successfully.")


def _check_name(models: tuple[ModelSpec, ...], name: str, base: ModelSpec, inplace: bool) -> None:
    """A name requests may use as a model: not another model's, nor another adapter's (but the one
    `inplace` replaces: an adapter of `base`)."""
    for spec in models:
        if name == spec.id or name in spec.aliases:
            raise InvalidRequestError(f"lora_name: '{name}' names a model.", param="lora_name")
        if spec.adapter_named(name) is not None and not (inplace and spec.id == base.id):
            raise InvalidRequestError(
                f"The lora adapter '{name}' has already been loaded.", param="lora_name"
            )


def _load_here(spec: ModelSpec, name: str, path: str, inplace: bool, asked: str) -> None:
    """Keep a place for the adapter, have this worker's llama.cpp load it there, then name it."""
    registry = _registry()
    place = registry.change(spec, lambda entry: runtime_adapters.add(entry, spec, name, path))
    loras = list(current_config().model.loras)
    loras[place] = LoraSpec(name, path, 0.0, runtime=True)
    outcome = _adopt_now(generating_engine(), loras)  # the model loaded and ready (or a 503)
    failed = "not taken in time" if outcome is None else outcome.get(place)

    def settle(entry: Entry) -> bool:
        taken = not inplace and runtime_adapters.effective(spec, entry).adapter_named(name) is not None
        if inplace and failed is None:
            runtime_adapters.remove(entry, spec, name)
        runtime_adapters.settle(entry, spec, place, loaded=failed is None and not taken)
        return taken

    if registry.change(spec, settle):  # another load of that name came first
        raise InvalidRequestError(f"The lora adapter '{name}' has already been loaded.", param="lora_name")
    if outcome is None:
        raise ServiceUnavailableError("The worker did not load the adapter in time; retry shortly.")
    if failed is not None:
        raise InvalidRequestError(
            f"lora_path: {asked}: llama.cpp could not load it as a LoRA adapter of '{spec.id}' (a GGUF "
            "LoRA converted for this base model?).",
            param="lora_path",
        )


def _adopt_now(engine: object, loras: Sequence[LoraSpec]) -> dict[int, str] | None:
    """This worker's `engine` (if loaded and generating) takes the adapters `loras` between two
    steps: which places failed, and why; None if it did not answer in LLM_TIMEOUT."""
    result = engine.adopt_adapters(loras) if isinstance(engine, Engine) else None
    if result is None:
        return {}
    failed: dict[int, str] | None = None  # stays None if the timeout fires
    with gevent.Timeout(current_config().timeout, False):
        failed = result.get()
    return failed


def _registry() -> Registry:
    registry: Registry = current_app.extensions["lora_registry"]
    return registry


def _text(message: str) -> Response:
    return Response(message, mimetype="text/plain")
