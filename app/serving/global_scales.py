"""A model's global LoRA scales (POST /lora-adapters), kept where every worker of the server reads them.

The scales are each worker's engine state; a worker that starts later (a restart, an
on-demand load) would start from LLM_MODELS' scales and answer differently from its
peers. So the scales set are also written to the server's run directory, a small file per
model, and a worker starting the model reads them. They hold while LLM_MODELS says the
same of the model's adapters: a reload (SIGHUP) that changes its adapters or their
scales starts from the new configuration.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from app.serving.peers import PeerTable
from app.settings.models import ModelSpec


def _path(spec: ModelSpec, table: PeerTable | None) -> Path | None:
    if table is None:
        return None
    named = hashlib.sha256(spec.id.encode()).hexdigest()[:16]  # an id may hold "/" or worse
    return Path(table.rundir) / f"lora-scales-{named}.json"


def _configured(spec: ModelSpec) -> dict[str, Any]:
    loras = spec.configured_adapters()
    return {"paths": [lora.path for lora in loras], "scales": [lora.scale for lora in loras]}


def save(spec: ModelSpec, scales: list[float], table: PeerTable | None) -> None:
    """Keep `scales` for the model in the run directory of the workers' `table` (None: one process,
    which has nobody to tell)."""
    path = _path(spec, table)
    if path is None:
        return
    # Written aside, then renamed over: a worker reading it sees the old list or the new, whole.
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".lora-")
    with os.fdopen(handle, "w") as file:
        json.dump({"configured": _configured(spec), "scales": scales}, file)
    os.replace(temporary, path)


def saved(spec: ModelSpec, table: PeerTable | None) -> list[float] | None:
    """The scales last set for the model, one per place of its adapters (0 for those loaded since, or
    unloaded), if any were set and LLM_MODELS still says what it said then."""
    path = _path(spec, table)
    if path is None or not spec.loras:
        return None
    with contextlib.suppress(FileNotFoundError, ValueError, TypeError, KeyError):
        saved = json.loads(path.read_text())
        if saved["configured"] == _configured(spec):
            scales = [float(scale) for scale in saved["scales"]][: len(spec.loras)]
            scales += [0.0] * (len(spec.loras) - len(scales))
            return [scale if lora.loaded else 0.0 for scale, lora in zip(scales, spec.loras, strict=True)]
    return None
