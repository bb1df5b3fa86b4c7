"""The run directory's adapter file: what one worker loads or unloads, every other worker's config shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.serving import runtime_adapters
from app.serving.runtime_adapters import Registry
from app.settings.config import Config
from app.settings.models import ModelSpec

MODELS = json.dumps(
    [
        {"id": "base", "path": "{model}", "loras": [{"id": "configured", "path": "{model}", "scale": 0.5}]},
        {"id": "other", "path": "{model}"},
    ]
)


@pytest.fixture
def config(tmp_path: Path) -> Config:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    return Config.from_env({"LLM_MODELS": MODELS.replace("{model}", str(model))})


def test_an_adapter_loaded_through_one_worker_is_a_model_on_another(config: Config, tmp_path: Path) -> None:
    mine, theirs = Registry(str(tmp_path)), Registry(str(tmp_path))
    spec = config.models[0]
    place = mine.change(spec, lambda entry: runtime_adapters.add(entry, spec, "tuned", "/t.gguf"))
    assert place == 1
    checking = theirs.overlay(config).models[0]
    assert checking.adapter_named("tuned") is None and not checking.loras[1].loaded  # not named yet
    mine.change(spec, lambda entry: runtime_adapters.settle(entry, spec, place, loaded=True))
    seen = theirs.overlay(config)
    assert seen.models[0].adapter_named("tuned") == 1 and seen.models[0].answers_to("tuned")
    assert seen.models[0].loras[1].runtime and seen.models[0].loras[1].scale == 0.0
    assert theirs.overlay(config) is seen  # unchanged file: the same object, one stat
    assert seen.models[1] is config.models[1]


def test_unloading_keeps_every_place_and_a_reload_takes_a_new_one(config: Config, tmp_path: Path) -> None:
    registry, spec = Registry(str(tmp_path)), config.models[0]
    for name in ("a", "b"):
        load(registry, spec, name)
    assert registry.change(spec, lambda entry: runtime_adapters.remove(entry, spec, "a"))
    assert registry.change(spec, lambda entry: runtime_adapters.remove(entry, spec, "configured"))
    assert not registry.change(spec, lambda entry: runtime_adapters.remove(entry, spec, "a"))  # gone already
    now = registry.overlay(config).models[0]
    assert [(n, lora.id) for n, lora in now.live_adapters()] == [(2, "b")]  # b keeps its index
    place = registry.change(spec, lambda entry: runtime_adapters.add(entry, spec, "a", "/x.gguf"))
    assert place == 3


def load(registry: Registry, spec: ModelSpec, name: str) -> None:
    place = registry.change(spec, lambda entry: runtime_adapters.add(entry, spec, name, "/x.gguf"))
    registry.change(spec, lambda entry: runtime_adapters.settle(entry, spec, place, True))


def test_an_entry_for_other_configured_adapters_is_ignored(config: Config, tmp_path: Path) -> None:
    registry, spec = Registry(str(tmp_path)), config.models[0]
    registry.change(spec, lambda entry: runtime_adapters.remove(entry, spec, "configured"))
    changed = json.loads((tmp_path / "lora-adapters.json").read_text())
    changed["base"]["configured"][0][2] = 1.0  # LLM_MODELS said another scale then
    (tmp_path / "lora-adapters.json").write_text(json.dumps(changed))
    assert Registry(str(tmp_path)).overlay(config).models[0].adapter_named("configured") == 0


def test_only_files_inside_the_allowed_directories_load(tmp_path: Path) -> None:
    allowed, outside = tmp_path / "loras", tmp_path / "elsewhere"
    allowed.mkdir()
    outside.mkdir()
    (allowed / "a.gguf").write_bytes(b"GGUF")
    (outside / "b.gguf").write_bytes(b"GGUF")
    (allowed / "link.gguf").symlink_to(outside / "b.gguf")
    dirs = (str(allowed),)
    assert runtime_adapters.allowed_path(dirs, "a.gguf") == str(allowed / "a.gguf")
    assert runtime_adapters.allowed_path(dirs, str(allowed / "a.gguf")) == str(allowed / "a.gguf")
    for escaping in ("../elsewhere/b.gguf", str(outside / "b.gguf"), "link.gguf"):
        with pytest.raises(PermissionError):
            runtime_adapters.allowed_path(dirs, escaping)
    for missing in ("missing.gguf", "a\x00.gguf", "\ud800.gguf"):
        with pytest.raises(FileNotFoundError):
            runtime_adapters.allowed_path(dirs, missing)
    with pytest.raises(PermissionError, match="LLM_LORA_DIRS"):
        runtime_adapters.allowed_path(None, "a.gguf")
