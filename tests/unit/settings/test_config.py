"""Settings: defaults, derived values, and one clear message per bad value."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from app.settings.config import Config
from app.settings.setting import ConfigError
from tests.unit.conftest import FAKE_MODEL

ROOT = Path(__file__).resolve().parents[3]


def settings(**env: str) -> Config:
    """Config from `env` on top of a stand-in model file (the real one comes from a wheel)."""
    return Config.from_env({"LLM_MODEL_PATH": FAKE_MODEL, **env})


@pytest.mark.parametrize(
    ("env", "value", "message"),
    [
        ("LLM_MODEL_PATH", "/nonexistent/model.gguf", "no such file"),
        ("LLM_MODEL_PATH", str(ROOT / "README.md"), "is not a GGUF model file"),
        ("LLM_MODEL_ID", "   x", None),
        ("LLM_N_CTX", "0", "must be an integer >= 1"),
        ("LLM_N_CTX", "-5", "must be an integer >= 1"),
        ("LLM_N_CTX", "big", "must be an integer >= 1"),
        ("LLM_N_BATCH", "0", "must be an integer >= 1"),
        ("LLM_N_THREADS", "-1", "must be an integer >= 0"),
        ("LLM_N_GPU_LAYERS", "x", "must be an integer >= 0"),
        ("LLM_TENSOR_SPLIT", "1,x", "comma-separated list"),
        ("LLM_PROMPT_CACHE", "maybe", "must be 0 or 1"),
        ("LLM_WORKERS", "0", "must be an integer >= 1"),
        ("LLM_BIND", "8000", "must be HOST:PORT"),
        ("LLM_BIND", "127.0.0.1:99999", "must be HOST:PORT"),
        ("LLM_MAX_BODY_BYTES", "0", "must be an integer >= 1"),
        ("LLM_MAX_TOKENS_LIMIT", "4096", "must not exceed LLM_N_CTX"),
        ("LLM_DEFAULT_MAX_TOKENS", "4096", "must not exceed the max_tokens limit"),
        ("LLM_SSE_KEEPALIVE", "-1", "must be a number >= 0"),
        ("LLM_MAX_GENERATION_SECONDS", "-3", "must be a number >= 0"),
        ("LLM_API_KEYS", ",", "lists no keys"),
        ("LLM_API_KEYS", "ci:sk-1,ci:sk-2", "the name 'ci' appears twice"),
        ("LLM_API_KEYS", "a:sk-1,b:sk-1", "the key appears twice"),
        ("LLM_API_KEYS_FILE", "/nonexistent/keys", "cannot read the file"),
        ("LLM_METRICS_AUTH", "sometimes", "must be 0 or 1"),
        ("LLM_CORS_ORIGINS", "app.example.com", "is not an origin"),
        ("LLM_CORS_ORIGINS", "https://app.example.com/path", "is not an origin"),
        ("LLM_LOG_FORMAT", "xml", "must be one of text, json"),
        ("LLM_MAX_QUEUE", "-1", "must be an integer >= 0"),
        ("LLM_QUEUE_TIMEOUT", "0", "must be a number > 0"),
        ("LLM_SLEEP_IDLE", "0", "must be a number > 0"),
        ("LLM_SLEEP_IDLE", "later", "must be a number > 0"),
        ("LLM_SSE_KEEPALIVE", "nan", "must be a number >= 0"),
        ("LLM_WORKER_TIMEOUT", "0", "must be an integer >= 1"),
        ("LLM_GRACEFUL_TIMEOUT", "soon", "must be an integer >= 1"),
    ],
)
def test_bad_value_names_the_variable(env: str, value: str, message: str | None) -> None:
    if message is None:  # a value with surrounding blanks is trimmed, not refused
        assert settings(**{env: value}).model_id == "x"
        return
    with pytest.raises(ConfigError) as caught:
        settings(**{env: value})
    assert str(caught.value).startswith(env) and message in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"LLM_PARALLEL": "64", "LLM_N_BATCH": "32"}, "LLM_PARALLEL=64: must not exceed LLM_N_BATCH=32"),
        ({"LLM_KV_SIZE": "1000", "LLM_N_CTX": "2048"}, "LLM_KV_SIZE=1000: must be at least LLM_N_CTX=2048"),
        (
            {"LLM_CACHE_TYPE_V": "q8_0", "LLM_BATCH_INVARIANT": "1"},
            "LLM_CACHE_TYPE_V=q8_0: a quantized V cache needs flash attention",
        ),
        ({"LLM_CACHE_DISK_MB": "64"}, "LLM_CACHE_DISK_PATH: a folder is needed"),
        (
            {"LLM_CACHE_DISK_MB": "64", "LLM_CACHE_DISK_PATH": "/tmp", "LLM_CACHE_RAM_MB": "0"},
            "LLM_CACHE_DISK_MB needs LLM_CACHE_RAM_MB above 0",
        ),
    ],
)
def test_settings_that_contradict_each_other(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        settings(**env)


def test_kv_size_defaults_to_a_whole_context_per_sequence() -> None:
    assert settings(LLM_PARALLEL="3", LLM_N_CTX="512").kv_size == 1536
    assert settings(LLM_PARALLEL="3", LLM_N_CTX="512", LLM_KV_SIZE="600").kv_size == 600


def test_tensor_split_longer_than_the_devices() -> None:
    config = settings(LLM_TENSOR_SPLIT="0.5,0.5")
    with pytest.raises(ConfigError, match="LLM_TENSOR_SPLIT lists 2 devices .* at most 1"):
        config.check_devices(1)
    config.check_devices(2)


def test_api_keys_from_the_variable_and_the_file(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("# team keys\nsk-file-1\n\n  sk-file-2  \n")
    config = settings(LLM_API_KEYS="sk-a,sk-b", LLM_API_KEYS_FILE=str(keys))
    assert [key.key for key in config.api_keys] == ["sk-a", "sk-b", "sk-file-1", "sk-file-2"]
    empty = tmp_path / "empty"
    empty.write_text("# nothing\n")
    with pytest.raises(ConfigError, match="holds no keys"):
        settings(LLM_API_KEYS_FILE=str(empty))


def test_named_keys_and_their_limits(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("# name key [limits]\nalice sk-alice concurrency=2 rpm=30\n\nbob sk-bob tpm=9\nsk-bare")
    config = settings(LLM_API_KEYS="ci:sk-ci,sk-plain", LLM_API_KEYS_FILE=str(keys))
    assert [(k.name, k.key, k.concurrency, k.rpm, k.tpm) for k in config.api_keys] == [
        ("ci", "sk-ci", None, None, None),
        ("key-433e1caaaa5f", "sk-plain", None, None, None),  # no name given: a digest of the key
        ("alice", "sk-alice", 2, 30, None),
        ("bob", "sk-bob", None, None, 9),
        ("key-99690b1b4700", "sk-bare", None, None, None),
    ]
    # What a key without a name was called by its place, before: the store moves its objects once.
    assert [k.legacy_name for k in config.api_keys] == [None, "key-2", None, None, "line-5"]
    for line, message in [
        ("carol sk-carol rpm=0", "line 1: word 3 is not one of concurrency=N, rpm=N, tpm=N"),
        ("carol sk-carol tpm=5 burst=5", "line 1: word 4 is not one of"),
        ("carol rpm=5 sk-carol", "line 1: word 3 is not one of"),  # the key out of place: never shown
        ("carol! sk-carol", "line 1: 'carol!' is not a name"),
    ]:
        broken = tmp_path / "broken"
        broken.write_text(line + "\n")
        with pytest.raises(ConfigError, match=re.escape(message)) as caught:
            settings(LLM_API_KEYS_FILE=str(broken))
        assert str(caught.value).startswith("LLM_API_KEYS_FILE") and "sk-carol" not in str(caught.value)
    with pytest.raises(ConfigError, match="the key appears twice"):
        settings(LLM_API_KEYS="dup:sk-alice", LLM_API_KEYS_FILE=str(keys))


def test_a_key_is_named_by_what_it_is_never_by_where_it_is() -> None:
    first = settings(LLM_API_KEYS="sk-one,sk-two,sk-three").api_keys
    second = settings(LLM_API_KEYS="sk-one,sk-three").api_keys  # sk-two removed
    assert first[2].name == second[1].name  # sk-three keeps its name: no key inherits sk-two's objects
    assert {key.name for key in second}.isdisjoint({first[1].name})
    assert all("sk-" not in key.name for key in first)  # the name shows nothing of the key


def test_operator_keys_are_keys_too_and_named_apart_from_tenants() -> None:
    config = settings(LLM_API_KEYS="alice:sk-alice", LLM_ADMIN_KEYS="ops:sk-ops,sk-root")
    assert [(k.name, k.operator) for k in config.api_keys] == [
        ("alice", False), ("ops", True), ("key-" + hashlib.sha256(b"sk-root").hexdigest()[:12], True)
    ]  # fmt: skip
    assert settings(LLM_ADMIN_KEYS="ops:sk-ops").api_keys[0].operator  # operators alone: keys are on
    with pytest.raises(ConfigError, match="LLM_ADMIN_KEYS: the name 'alice' appears twice"):
        settings(LLM_API_KEYS="alice:sk-alice", LLM_ADMIN_KEYS="alice:sk-other")
    with pytest.raises(ConfigError, match="the key appears twice"):
        settings(LLM_API_KEYS="alice:sk-alice", LLM_ADMIN_KEYS="ops:sk-alice")


def test_a_key_file_broken_after_a_good_read_keeps_the_keys_read_before(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("alice sk-alice rpm=5\n")
    assert [k.name for k in settings(LLM_API_KEYS_FILE=str(keys)).api_keys] == ["alice"]
    keys.write_text("alice sk-alice rpm=five\n")  # an edit gone wrong, then SIGHUP
    assert [k.rpm for k in settings(LLM_API_KEYS_FILE=str(keys)).api_keys] == [5]
    keys.write_text("alice sk-alice rpm=5\nbob sk-bob\n")
    assert [k.name for k in settings(LLM_API_KEYS_FILE=str(keys)).api_keys] == ["alice", "bob"]


def test_a_bad_secret_is_never_echoed() -> None:
    with pytest.raises(ConfigError) as caught:
        settings(LLM_API_KEYS=" , ")
    assert "LLM_API_KEYS" in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        settings(LLM_API_KEYS="sk-secret", LLM_N_CTX="0")
    assert "sk-secret" not in str(caught.value)


def test_the_store_url_from_a_file(tmp_path: Path) -> None:
    url_file = tmp_path / "url"
    url_file.write_text("postgresql://llm:secret@db:5432/llm\n")
    assert settings(LLM_STORE_URL_FILE=str(url_file)).store_url == "postgresql://llm:secret@db:5432/llm"
    with pytest.raises(ConfigError, match="set it or LLM_STORE_URL, not both"):
        settings(LLM_STORE_URL_FILE=str(url_file), LLM_STORE_URL="sqlite:///x.sqlite3")
    url_file.write_text("mysql://llm:secret@db/llm\n")
    with pytest.raises(ConfigError, match="LLM_STORE_URL_FILE=.*must be a sqlite") as wrong:
        settings(LLM_STORE_URL_FILE=str(url_file))
    assert "secret" not in str(wrong.value)  # the file's path is named, never what it holds


def test_the_fastest_kernels_are_the_default_and_a_quantized_v_cache_runs_on_them() -> None:
    config = settings(LLM_CACHE_TYPE_V="q8_0")
    assert config.cache_type_v == "q8_0" and not config.batch_invariant
    assert not settings().batch_invariant and settings().swa_full and settings().ctx_checkpoints == 8
    assert settings(LLM_BATCH_INVARIANT="1").batch_invariant
    with pytest.raises(ConfigError, match="LLM_CACHE_TYPE_V=q8_0: a quantized V cache needs flash"):
        settings(LLM_CACHE_TYPE_V="q8_0", LLM_BATCH_INVARIANT="1")
