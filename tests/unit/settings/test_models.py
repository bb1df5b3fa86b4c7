"""LLM_MODELS: each entry checked with a message naming it, and which model a new worker takes."""

from __future__ import annotations

import json
import re

import pytest

from app.settings.models import POOL, LoraSpec, ModelSpec, model_for_new_worker, parse
from app.settings.setting import ConfigError
from tests.unit.conftest import FAKE_MODEL
from tests.unit.settings.test_config import settings


def entries(*models: dict) -> str:
    return json.dumps(list(models))


def test_a_good_list() -> None:
    chat = {"id": "chat", "path": FAKE_MODEL, "workers": 2, "parallel": 8}
    specs = parse(entries(chat, {"id": "embed", "path": FAKE_MODEL, "embedding": True, "pooling": "cls"}))
    assert specs == (
        ModelSpec(id="chat", path=FAKE_MODEL, workers=2, parallel=8),
        ModelSpec(id="embed", path=FAKE_MODEL, pooling="cls", embedding=True),
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{oops", "is not valid JSON"),
        ("[]", "must be a JSON list of models"),
        (entries({"path": FAKE_MODEL}), "entry 0: needs an id"),
        (entries({"id": "a", "path": "/nonexistent.gguf"}), "entry 0 ('a'): path no such file"),
        (
            entries({"id": "a", "path": FAKE_MODEL}, {"id": "a", "path": FAKE_MODEL}),
            "entry 1 ('a'): 'a' names two models",
        ),
        (entries({"id": "a", "path": FAKE_MODEL, "workers": 0}), "entry 0 ('a'): workers must be an integer"),
        (entries({"id": "a", "path": FAKE_MODEL, "parallel": True}), "parallel must be an integer"),
        (
            entries({"id": "a", "path": FAKE_MODEL, "pooling": "max"}),
            "pooling must be one of mean, cls, last, rank",
        ),
        (
            entries({"id": "a", "path": FAKE_MODEL, "cache_type_v": "q3_k"}),
            "entry 0 ('a'): cache_type_v must be one of f16, f32, bf16, q8_0",
        ),
        (
            entries({"id": "a", "path": FAKE_MODEL, "draft": "/nonexistent.gguf"}),
            "entry 0 ('a'): draft no such file",
        ),
        (
            entries({"id": "a", "path": FAKE_MODEL, "spec_type": "eagle"}),
            "spec_type must be one of none, ngram, draft",
        ),
        (entries({"id": "a", "path": FAKE_MODEL, "colour": "red"}), "entry 0 ('a'): unknown key 'colour'"),
        (entries({"id": "a", "path": FAKE_MODEL, "aliases": "b"}), "entry 0 ('a'): aliases must be a list"),
        (entries({"id": "a", "path": FAKE_MODEL, "aliases": [""]}), "aliases must be a list of non-empty"),
        (
            entries({"id": "a", "path": FAKE_MODEL}, {"id": "b", "path": FAKE_MODEL, "aliases": ["a"]}),
            "entry 1 ('b'): 'a' names two models",
        ),
        (entries({"id": "a", "path": FAKE_MODEL, "load": "lazy"}), "load must be one of startup, on_demand"),
        (entries({"id": "a", "path": FAKE_MODEL, "loras": {}}), "loras must be a list"),
        (entries({"id": "a", "path": FAKE_MODEL, "loras": [{"path": FAKE_MODEL}]}), "loras[0] needs an id"),
        (
            entries({"id": "a", "path": FAKE_MODEL, "loras": [{"id": "x", "path": "/none.gguf"}]}),
            "entry 0 ('a'): loras[0] path no such file",
        ),
        (
            entries({"id": "a", "path": FAKE_MODEL, "loras": [{"id": "x", "path": FAKE_MODEL, "scale": ""}]}),
            "loras[0] scale must be a number",
        ),
        (
            entries({"id": "a", "path": FAKE_MODEL, "loras": [{"id": "x", "path": FAKE_MODEL, "alpha": 1}]}),
            'loras[0] must be an object with "id", "path" and "scale"',
        ),
        (
            entries(
                {
                    "id": "a",
                    "path": FAKE_MODEL,
                    "loras": [{"id": "x", "path": FAKE_MODEL}, {"id": "x", "path": FAKE_MODEL}],
                }
            ),
            "loras[1]: the id 'x' is taken",
        ),  # fmt: skip
        (  # requests may name an adapter as their model: it names one thing only
            entries(
                {"id": "a", "path": FAKE_MODEL},
                {"id": "b", "path": FAKE_MODEL, "loras": [{"id": "a", "path": FAKE_MODEL}]},
            ),
            "entry 1 ('b'): 'a' names two models (ids, aliases and LoRA adapters' ids",
        ),
        (
            entries(
                {"id": "a", "path": FAKE_MODEL, "loras": [{"id": "x", "path": FAKE_MODEL}]},
                {"id": "b", "path": FAKE_MODEL, "loras": [{"id": "x", "path": FAKE_MODEL}]},
            ),
            "entry 1 ('b'): 'x' names two models",
        ),
        (
            entries({"id": "a", "path": FAKE_MODEL, "load": "on_demand", "workers": 2}),
            "entry 0 ('a'): an on-demand entry has no workers of its own",
        ),
        (entries({"id": "a", "path": FAKE_MODEL, "ttl": 60}), 'ttl applies only to an entry with "load"'),
        (
            entries({"id": "a", "path": FAKE_MODEL, "load": "on_demand", "ttl": 0}),
            "ttl must be an integer from 1 to 604800",
        ),
    ],
)
def test_a_bad_entry_is_named(raw: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse(raw)


def test_worker_counts_must_agree() -> None:
    two = entries({"id": "a", "path": FAKE_MODEL}, {"id": "b", "path": FAKE_MODEL})
    assert settings(LLM_MODELS=two).workers == 2  # the sum, when LLM_WORKERS is not set
    with pytest.raises(ConfigError, match="LLM_MODELS asks for 2 workers in all but LLM_WORKERS=3"):
        settings(LLM_MODELS=two, LLM_WORKERS="3")


def test_each_worker_gets_its_models_settings() -> None:
    raw = entries(
        {"id": "a", "path": FAKE_MODEL, "n_ctx": 512, "parallel": 2}, {"id": "b", "path": FAKE_MODEL}
    )
    config = settings(LLM_MODELS=raw, LLM_N_CTX="1024")
    first, second = config.for_model(0), config.for_model(1)
    assert (first.model_id, first.n_ctx, first.parallel, first.kv_size) == ("a", 512, 2, 1024)
    assert (second.model_id, second.n_ctx, second.parallel, second.kv_size) == ("b", 1024, 4, 4096)


def test_kv_cache_types_per_entry_or_from_the_variables() -> None:
    raw = entries({"id": "a", "path": FAKE_MODEL, "cache_type_k": "q4_0"}, {"id": "b", "path": FAKE_MODEL})
    config = settings(LLM_MODELS=raw, LLM_CACHE_TYPE_V="q8_0")
    first, second = config.for_model(0), config.for_model(1)
    assert (first.cache_type_k, first.cache_type_v) == ("q4_0", "q8_0")
    assert (second.cache_type_k, second.cache_type_v) == ("f16", "q8_0")
    quantized = entries(
        {"id": "a", "path": FAKE_MODEL}, {"id": "b", "path": FAKE_MODEL, "cache_type_v": "q4_0"}
    )
    with pytest.raises(
        ConfigError, match=r"LLM_MODELS entry 1 \('b'\) cache_type_v=q4_0: a quantized V cache"
    ):
        settings(LLM_MODELS=quantized, LLM_BATCH_INVARIANT="1")


def test_memory_settings_per_entry_or_from_the_variables() -> None:
    raw = entries(
        {"id": "a", "path": FAKE_MODEL, "swa_full": False, "ctx_checkpoints": 0},
        {"id": "b", "path": FAKE_MODEL},
    )
    config = settings(LLM_MODELS=raw, LLM_CTX_CHECKPOINTS="3")
    first, second = config.for_model(0), config.for_model(1)
    assert (first.swa_full, first.ctx_checkpoints) == (False, 0)
    assert (second.swa_full, second.ctx_checkpoints) == (True, 3)
    with pytest.raises(ConfigError, match="swa_full must be true or false"):
        settings(LLM_MODELS=entries({"id": "a", "path": FAKE_MODEL, "swa_full": "yes"}))


def test_an_entry_with_a_draft_model_drafts_with_it() -> None:
    raw = entries({"id": "a", "path": FAKE_MODEL, "draft": FAKE_MODEL}, {"id": "b", "path": FAKE_MODEL})
    config = settings(LLM_MODELS=raw, LLM_SPEC_MAX="4")
    first, second = config.for_model(0), config.for_model(1)
    assert (first.spec_type, first.spec_draft, first.spec_max) == ("draft", FAKE_MODEL, 4)
    assert (second.spec_type, second.spec_draft) == ("none", None)
    with pytest.raises(ConfigError, match=r"LLM_MODELS entry 1 \('b'\): speculative decoding with a draft"):
        settings(LLM_MODELS=raw, LLM_SPEC_TYPE="draft")


def test_new_workers_fill_the_model_furthest_below_its_share() -> None:
    specs = [ModelSpec(id="a", path=FAKE_MODEL, workers=2), ModelSpec(id="b", path=FAKE_MODEL)]
    assert model_for_new_worker(specs, []) == 0
    assert model_for_new_worker(specs, [0]) == 1
    assert model_for_new_worker(specs, [0, 1]) == 0
    assert model_for_new_worker(specs, [0, 0]) == 1  # b's worker died: its replacement holds b
    assert model_for_new_worker(specs, [0, 0, 1, 0]) == 1  # a reload: new workers spread evenly


def test_an_entry_answers_to_its_aliases() -> None:
    (spec,) = parse(entries({"id": "chat", "path": FAKE_MODEL, "aliases": ["smol", " gpt-4o-mini "]}))
    assert spec.aliases == ("smol", "gpt-4o-mini")
    assert spec.answers_to("chat") and spec.answers_to("smol") and spec.answers_to("gpt-4o-mini")
    assert not spec.answers_to("gpt-4o")


def test_an_on_demand_entry_has_no_workers_and_a_pool_loads_it() -> None:
    raw = entries(
        {"id": "chat", "path": FAKE_MODEL, "workers": 2},
        {"id": "big", "path": FAKE_MODEL, "load": "on_demand", "ttl": 300},
    )
    chat, big = parse(raw)
    assert (big.workers, big.on_demand, big.ttl) == (0, True, 300)
    assert not chat.on_demand
    config = settings(LLM_MODELS=raw)
    assert (config.on_demand_workers, config.workers) == (1, 3)  # a pool of one unless told
    assert settings(LLM_MODELS=raw, LLM_ON_DEMAND_WORKERS="2").workers == 4
    with pytest.raises(ConfigError, match="LLM_ON_DEMAND_WORKERS=0: LLM_MODELS loads big on demand"):
        settings(LLM_MODELS=raw, LLM_ON_DEMAND_WORKERS="0")
    with pytest.raises(ConfigError, match="LLM_ON_DEMAND_WORKERS=1: no LLM_MODELS entry"):
        settings(LLM_ON_DEMAND_WORKERS="1")
    pool_worker = config.for_model(POOL)  # holds none: the server-wide settings, no model id
    assert (pool_worker.model_index, pool_worker.model_id) == (POOL, "")


def test_the_pool_is_one_more_share_of_the_workers() -> None:
    big = ModelSpec(id="big", path=FAKE_MODEL, workers=0, on_demand=True)
    specs = [ModelSpec(id="a", path=FAKE_MODEL, workers=2), big]
    assert model_for_new_worker(specs, [], 0, 1) == 0
    assert model_for_new_worker(specs, [0], 0, 1) == POOL  # a at half its share, the pool empty
    assert model_for_new_worker(specs, [0], 1, 1) == 0
    assert model_for_new_worker(specs, [0, 0], 0, 1) == POOL  # the pool worker died: replaced
    assert model_for_new_worker(specs, [0, 0], 1, 2) == POOL


def test_an_entry_loads_its_lora_adapters_at_their_global_scales() -> None:
    loras = [{"id": "pirate", "path": FAKE_MODEL}, {"id": "formal", "path": FAKE_MODEL, "scale": 0}]
    (spec,) = parse(entries({"id": "chat", "path": FAKE_MODEL, "loras": loras}))
    assert spec.loras == (LoraSpec("pirate", FAKE_MODEL, 1.0), LoraSpec("formal", FAKE_MODEL, 0.0))
