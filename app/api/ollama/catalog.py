"""What Ollama's clients list and show of a model (/api/tags, /api/show, /api/ps), from its GGUF header."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from app.api.http.shown import file_path
from app.chat_formats import detect
from app.engine.gguf import gguf_metadata
from app.engine.multimodal.projector import capabilities_of
from app.serving.peers import Peer
from app.settings.config import Config
from app.settings.models import ModelSpec

# llama.cpp's file types (general.file_type), as Ollama names quantization levels.
_FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
    12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
    19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL",
    26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16",
    36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4",
}  # fmt: skip


def served_name(name: str, served: Sequence[ModelSpec]) -> str:
    """The served model an Ollama name means: `name:latest` is `name`, unless a model answers to it."""
    if name.endswith(":latest") and not any(spec.answers_to(name) for spec in served):
        return name.removesuffix(":latest")
    return name


def details(spec: ModelSpec) -> dict[str, Any]:
    """Ollama's `details`: format, family, parameter size and quantization level."""
    meta = gguf_metadata.of(spec.path)
    family = str(meta.get("general.architecture", "unknown"))
    return {
        "parent_model": "",
        "format": "gguf",
        "family": family,
        "families": [family],
        "parameter_size": str(meta.get("general.size_label", "")),
        "quantization_level": _FILE_TYPES.get(int(meta.get("general.file_type", -1)), "unknown"),
    }


def listed(spec: ModelSpec) -> dict[str, Any]:
    """One entry of /api/tags."""
    stat = Path(spec.path).stat()
    return {
        "name": spec.id,
        "model": spec.id,
        "modified_at": datetime.fromtimestamp(stat.st_mtime, UTC).isoformat(),
        "size": stat.st_size,
        # Which file, at which version (not a hash of its gigabytes, which listing would have to read).
        "digest": hashlib.sha256(f"{spec.path}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest(),
        "details": details(spec),
    }


def listed_adapters(spec: ModelSpec) -> list[dict[str, Any]]:
    """The model's loaded LoRA adapters as entries of /api/tags: models of their own (a request names
    them so), `details.parent_model` their base model, as Ollama's ADAPTER models."""
    base = listed(spec)
    entries = []
    for _, lora in spec.live_adapters():
        size = Path(lora.path).stat().st_size
        digest = hashlib.sha256(f"{base['digest']}:{lora.path}:{size}".encode()).hexdigest()
        entries.append(
            {
                **base,
                "name": lora.id,
                "model": lora.id,
                "size": base["size"] + size,
                "digest": digest,
                "details": {**base["details"], "parent_model": spec.id},
            }  # fmt: skip
        )
    return entries


def template(spec: ModelSpec) -> str:
    """The chat template the model is served with: LLM_MODELS' own, else the GGUF's."""
    if spec.chat_template is not None:
        return spec.chat_template
    return str(gguf_metadata.of(spec.path).get("tokenizer.chat_template", ""))


def capabilities(spec: ModelSpec) -> list[str]:
    """What Ollama's clients may ask of the model; thinking as the chat API's template probe finds it."""
    if spec.embedding:
        return ["embedding"]
    text = template(spec)
    found = ["completion"]
    if "tools" in text:
        found.append("tools")
    if detect.thinks(text, detect.by_name(spec.chat_format) if spec.chat_format else detect.detect(text)):
        found.append("thinking")
    takes = capabilities_of(spec.mmproj)
    found += ["vision"] * takes.vision + ["audio"] * takes.audio  # Ollama's names
    return found


def shown(spec: ModelSpec, context_length: int, verbose: bool) -> dict[str, Any]:
    """/api/show: the template, details, the header's values (long arrays only when verbose) and
    what the model can do."""
    meta = gguf_metadata.of(spec.path)
    info = {key: value for key, value in meta.items() if verbose or not key.startswith("tokenizer.")}
    # Clients size `options.num_ctx` from this value (LlamaIndex sends it with every request): it is
    # the context this server runs the model with, and the file's own stays beside it.
    architecture = meta.get("general.architecture")
    if architecture:
        trained = info.get(f"{architecture}.context_length")
        info[f"{architecture}.context_length"] = context_length
        if trained is not None:
            info[f"{architecture}.context_length_trained"] = trained
    return {
        "modelfile": f"# Served by llm-server from LLM_MODELS\nFROM {file_path(spec.path)}\n",
        "parameters": f"num_ctx {context_length}",
        "template": template(spec),
        "details": details(spec),
        "model_info": info,
        "capabilities": capabilities(spec),
        "modified_at": listed(spec)["modified_at"],
    }


def running(config: Config, peers: Sequence[Peer]) -> list[dict[str, Any]]:
    """/api/ps' models: each loaded now, by which workers, and until when (on-demand ones with a ttl)."""
    loaded: dict[int, dict[str, Any]] = {}
    for peer in peers:
        if not (peer.live and peer.ready and peer.model >= 0):
            continue
        if peer.model not in loaded:
            spec = config.models[peer.model]
            loaded[peer.model] = {
                **listed(spec),
                "expires_at": _expiry(spec.ttl if spec.on_demand else None, peer.idle_seconds),
                "size_vram": 0,  # llama.cpp on the CPU here
                "context_length": config.for_model(peer.model).n_ctx,
                "workers": [],
            }
        loaded[peer.model]["workers"].append({"slot": peer.seat, "pid": peer.pid})
    return list(loaded.values())


def _expiry(ttl: int | None, idle: float) -> str:
    """When an idle model would be unloaded: its ttl less its idle time, or never (held for good)."""
    if ttl is None:
        return datetime(9999, 12, 31, tzinfo=UTC).isoformat()
    return (datetime.now(UTC) + timedelta(seconds=max(0.0, ttl - idle))).isoformat()
