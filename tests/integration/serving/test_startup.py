"""Bad configuration stops the real gunicorn with one clear line and a non-zero exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from app.settings.config import SETTINGS, Config
from app.settings.cpu import usable_cores
from app.settings.values import default_model_path
from harness.servers import GUNICORN, ROOT, Server, free_port
from tests.support import tiny_bert, tiny_models
from tests.support.procs import worker_pids
from tests.support.waits import wait_for_log


def start(env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(GUNICORN), "-c", "gunicorn.conf.py", "wsgi:app"],
        cwd=ROOT,
        env={
            **os.environ,
            "LLM_BIND": f"127.0.0.1:{free_port()}",
            "LLM_DATA_DIR": tempfile.mkdtemp(prefix="test-data-"),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=timeout,
    )


BAD_SETTINGS = [
    pytest.param(env, value, id=f"{env}={value}")
    for env, value in [
        ("LLM_MODEL_PATH", "/nonexistent/model.gguf"),
        ("LLM_MODEL_PATH", str(ROOT / "wsgi.py")),
        ("LLM_N_CTX", "0"),
        ("LLM_N_CTX", "-1"),
        ("LLM_N_BATCH", "zero"),
        ("LLM_PARALLEL", "0"),
        ("LLM_PARALLEL", "257"),
        ("LLM_PREFILL_CHUNK", "0"),
        ("LLM_KV_SIZE", "100"),
        ("LLM_MODELS", '[{"id": "a", "path": "/nonexistent/model.gguf"}]'),
        ("LLM_N_THREADS", "-2"),
        ("LLM_N_GPU_LAYERS", "-1"),
        ("LLM_TENSOR_SPLIT", "0.5,0.5"),
        ("LLM_CACHE_TYPE_K", "q3_k"),
        ("LLM_CACHE_TYPE_V", "int8"),
        ("LLM_SPEC_TYPE", "draft-model"),
        ("LLM_SPEC_MAX", "0"),
        ("LLM_SPEC_DRAFT", "/nonexistent/draft.gguf"),
        ("LLM_PROMPT_CACHE", "sometimes"),
        ("LLM_SWA_FULL", "half"),
        ("LLM_CTX_CHECKPOINTS", "257"),
        ("LLM_BATCH_INVARIANT", "maybe"),
        ("LLM_WORKERS", "0"),
        ("LLM_ON_DEMAND_WORKERS", "64"),
        ("LLM_ON_DEMAND_WORKERS", "2"),  # no entry loads on demand
        ("LLM_BIND", "nowhere"),
        ("LLM_MAX_BODY_BYTES", "-1"),
        ("LLM_MMPROJ", "/nonexistent/mmproj.gguf"),
        ("LLM_MAX_MEDIA_BYTES", "-1"),
        ("LLM_MAX_MEDIA_PARTS", "0"),
        ("LLM_MAX_IMAGE_PIXELS", "lots"),
        ("LLM_MAX_AUDIO_SECONDS", "0"),
        ("LLM_MEDIA_FETCH", "ftp://files.example.com/"),
        ("LLM_MEDIA_FETCH_TIMEOUT", "0"),
        ("LLM_MCP_ALLOW", "ftp://tools.example.com/"),
        ("LLM_MCP_TIMEOUT", "0"),
        ("LLM_MCP_MAX_OUTPUT_BYTES", "0"),
        ("LLM_MCP_MAX_CALLS", "65"),
        ("LLM_MCP_SERVERS", '{"calc": {"url": "http://h/mcp", "command": "prog"}}'),
        ("LLM_MCP_SERVERS", '{"calc": {"url": "http://h/mcp", "headers_file": "/nonexistent/headers.json"}}'),
        ("LLM_MAX_TOKENS_LIMIT", "99999"),
        ("LLM_DEFAULT_MAX_TOKENS", "99999"),
        ("LLM_SSE_KEEPALIVE", "soon"),
        ("LLM_MAX_GENERATION_SECONDS", "forever"),
        ("LLM_CACHE_RAM_MB", "-1"),
        ("LLM_CACHE_DISK_MB", "-1"),
        ("LLM_CACHE_REUSE", "-1"),
        ("LLM_CACHE_DISK_PATH", str(ROOT / "wsgi.py")),
        ("LLM_ROUTE_BY_CACHE", "maybe"),
        ("LLM_MAX_QUEUE", "many"),
        ("LLM_QUEUE_TIMEOUT", "-1"),
        ("LLM_SLEEP_IDLE", "-5"),
        ("LLM_LORA_DIRS", "/no/such/dir"),
        ("LLM_API_KEYS_FILE", "/nonexistent/keys"),
        ("LLM_METRICS_AUTH", "perhaps"),
        ("LLM_SHOW_PATHS", "perhaps"),
        ("LLM_CACHE_SHARING", "alice+"),
        ("LLM_CACHE_SHARING", "ghost"),  # a group naming no key there is (here: no keys at all)
        ("LLM_WARM_SET", "/nonexistent/warm.jsonl"),
        ("LLM_WARM_SET", str(ROOT / "wsgi.py")),  # not JSON Lines
        ("LLM_METRICS_MAX_AGE", "-1"),
        ("LLM_STORE", "maybe"),
        ("LLM_DATA_DIR", str(ROOT / "wsgi.py")),
        ("LLM_SLOT_SAVE_PATH", str(ROOT / "wsgi.py")),
        ("LLM_CONTEXT_OVERFLOW", "drop"),
        ("LLM_CONTEXT_SHIFT", "maybe"),
        ("LLM_STORE_URL", "mysql://user@localhost/db"),
        ("LLM_STORE_URL_FILE", "/nonexistent/store-url"),
        ("LLM_STORE_TTL", "soon"),
        ("LLM_MAX_FILE_BYTES", "0"),
        ("LLM_BATCH_LEASE", "1"),
        ("LLM_UI", "on"),
        ("LLM_CORS_ORIGINS", "not-an-origin"),
        ("LLM_LOG_FORMAT", "yaml"),
        ("LLM_API_KEYS", ","),
        ("LLM_ADMIN_KEYS", ","),
        ("LLM_REASONING_KEY", "too short"),
        ("LLM_MAX_N", "0"),
        ("LLM_REASONING_BUDGET", "-2"),
        ("LLM_PREFILL_ASSISTANT", "sometimes"),
        ("LLM_PRIORITY_HEADER", "X Priority"),
        ("LLM_WORKER_TIMEOUT", "0"),
        ("LLM_GRACEFUL_TIMEOUT", "-5"),
    ]
]


@pytest.mark.parametrize(("env", "value"), BAD_SETTINGS)
def test_bad_setting_stops_start_up_with_one_line(env: str, value: str) -> None:
    result = start({env: value})
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"configuration error: {env}"), result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("env", "value"), [("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"), ("OTEL_TRACES_EXPORTER", "zipkin")]
)
def test_a_tracing_set_up_the_server_cannot_export_to_stops_start_up_with_one_line(
    env: str, value: str
) -> None:
    result = start({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", env: value})
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"configuration error: {env}={value!r}"), result.stderr


def test_every_setting_has_a_bad_value_case() -> None:
    covered = {case.values[0] for case in BAD_SETTINGS}
    # LLM_MODEL_ID has no bad value: any non-blank text is an id, and blank means the default.
    assert covered | {"LLM_MODEL_ID"} == {setting.env for setting in SETTINGS.values()}


@pytest.mark.parametrize(
    ("env", "named", "reason"),
    [
        ({"LLM_STORE_URL": "postgresql://llm:pw@127.0.0.1:{port}/llm"}, "LLM_STORE_URL", "refused"),
        ({"LLM_DATA_DIR": "/proc/llm-server"}, "LLM_DATA_DIR", "cannot create the folder"),
    ],
    ids=["unreachable-database", "data-dir-not-writable"],
)
def test_a_store_that_cannot_be_opened_stops_start_up_with_one_line(
    env: dict[str, str], named: str, reason: str
) -> None:
    env = {key: value.format(port=free_port()) for key, value in env.items()}
    result = start(env)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"configuration error: {named}: the store cannot be opened: ")
    assert reason in lines[0] and "pw" not in lines[0]
    assert "Traceback" not in result.stderr


def test_unloadable_model_halts_the_server(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + os.urandom(4096))  # passes the magic check, fails to load
    result = start({"LLM_MODEL_PATH": str(broken)})
    assert result.returncode == 3
    assert f"LLM_MODEL_PATH={broken}: llama.cpp could not load it" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_draft_model_with_another_vocabulary_halts_the_server(tmp_path: Path) -> None:
    bert = tiny_bert.write(tmp_path / "tiny-bert.gguf")
    result = start({"LLM_SPEC_TYPE": "draft", "LLM_SPEC_DRAFT": str(bert)})
    assert result.returncode == 3
    (line,) = [line for line in result.stderr.splitlines() if "could not load it" in line]
    assert f"draft model {bert}: the draft model has" in line and "tokens, the model 49152" in line
    assert "Traceback" not in result.stderr


def test_a_quantized_v_cache_in_the_reproducible_mode_stops_start_up_with_one_line() -> None:
    # A quantized V cache needs flash attention, which LLM_BATCH_INVARIANT=1 turns off.
    result = start({"LLM_CACHE_TYPE_V": "q8_0", "LLM_BATCH_INVARIANT": "1"})
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("configuration error: LLM_CACHE_TYPE_V=q8_0: a quantized V cache needs flash")


def test_drafting_with_a_model_needs_one() -> None:
    result = start({"LLM_SPEC_TYPE": "draft"})
    assert result.returncode == 2
    assert result.stderr.strip().startswith(
        "configuration error: LLM_SPEC_TYPE: speculative decoding with a draft"
    )


def test_good_configuration_starts(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_MODEL_ID="my-model", LLM_N_CTX="512", LLM_WORKERS="2")
    assert httpx.get(server.url + "/v1/models/my-model").json()["id"] == "my-model"


def test_defaults_serve_the_bundled_model() -> None:
    config = Config.from_env({})
    assert config.model_path == default_model_path() and config.model_path.endswith(".gguf")
    assert config.model_id == "SmolLM2-135M-Instruct.Q4_1"
    assert config.n_ctx == 2048 and config.max_tokens_limit == 2048 and config.n_threads >= 1
    assert config.prompt_cache is True and 0 < config.sse_keepalive < 10
    assert config.parallel == 4 and config.kv_size == 4 * 2048


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (("-w", "2"), {}),
        ((), {"WEB_CONCURRENCY": "2"}),
        ((), {"GUNICORN_CMD_ARGS": "--workers 2"}),
    ],
    ids=["-w", "WEB_CONCURRENCY", "GUNICORN_CMD_ARGS"],
)
def test_gunicorns_own_worker_count_divides_the_threads(args: tuple[str, ...], env: dict[str, str]) -> None:
    # As users start it: gunicorn's own ways of asking for workers, no LLM_WORKERS.
    server = Server(args, **env)
    try:
        server.wait_ready(answers=6)
        assert len(worker_pids(server.process.pid)) == 2
        threads = max(1, usable_cores() // 2)
        loaded = wait_for_log(server, " loaded in ", count=2)
        lines = [line for line in loaded.splitlines() if " loaded in " in line]
        assert all(f", {threads} threads, memory: " in line for line in lines), lines
    finally:
        server.stop()


def test_models_that_do_not_fill_gunicorns_workers_stop_start_up() -> None:
    path = default_model_path()
    models = json.dumps([{"id": "a", "path": path}, {"id": "b", "path": path}])
    result = start({"LLM_MODELS": models, "GUNICORN_CMD_ARGS": "--workers 3"})
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if "configuration error" in line]
    assert lines == [
        "configuration error: LLM_MODELS asks for 2 workers in all but gunicorn runs 3 "
        "(-w, WEB_CONCURRENCY or GUNICORN_CMD_ARGS)"
    ], result.stderr


def test_an_embedding_model_served_for_chat_halts_naming_it(tmp_path: Path) -> None:
    bert = str(tiny_bert.write(tmp_path / "tiny-bert.gguf"))
    result = start({"LLM_MODELS": json.dumps([{"id": "bert", "path": bert}])})
    assert result.returncode == 3
    assert f"LLM_MODELS ('bert')={bert}: llama.cpp could not load it: an embedding model cannot generate" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr


def test_an_embedding_model_that_names_no_pooling_stops_start_up_before_serving() -> None:
    models = [
        {"id": "chat", "path": default_model_path()},
        {"id": "embed", "path": default_model_path(), "embedding": True},  # SmolLM2's GGUF names none
    ]
    result = start({"LLM_MODELS": json.dumps(models)})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr  # before gunicorn even listens: no worker ever served
    assert lines[0].startswith("configuration error: LLM_MODELS entry 1 ('embed'): ")
    assert 'set "pooling" (mean, cls or last)' in lines[0]


def test_a_gguf_whose_tensors_run_past_its_end_halts_the_server_naming_the_file(tmp_path: Path) -> None:
    cut = tmp_path / "cut-short.gguf"
    cut.write_bytes(Path(default_model_path()).read_bytes()[: 40 << 20])  # its header whole, data cut
    result = start({"LLM_MODEL_PATH": str(cut)})
    assert result.returncode == 3
    (line,) = [line for line in result.stderr.splitlines() if "could not load it" in line]
    assert f"LLM_MODEL_PATH={cut}: llama.cpp could not load it" in line
    # llama.cpp's own reason, from its log, in the one line: not just that the load failed.
    assert "data is not within the file bounds" in line, line
    assert "Traceback" not in result.stderr


def test_a_gguf_whose_chat_template_loops_halts_the_server_naming_the_file(tmp_path: Path) -> None:
    looping = tmp_path / "looping-template.gguf"
    template = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    command = [sys.executable, "-m", "gguf.scripts.gguf_new_metadata", "--chat-template", template, "--force"]
    subprocess.run([*command, default_model_path(), str(looping)], check=True, capture_output=True)
    result = start({"LLM_MODEL_PATH": str(looping)})
    assert result.returncode == 3, result.stderr[-2000:]
    (line,) = [line for line in result.stderr.splitlines() if "could not load it" in line]
    assert (
        f"LLM_MODEL_PATH={looping}" in line
        and "its chat template cannot serve" in line
        and "loops past" in line
    )
    assert "Traceback" not in result.stderr


def test_a_gguf_whose_vocabulary_holds_a_token_twice_halts_the_server_naming_the_file() -> None:
    # llama.cpp asserts against it (the process aborts, and gunicorn would start another forever).
    twice = tiny_models.path("token-twice")
    result = start({"LLM_MODEL_PATH": str(twice)})
    assert result.returncode == 3, result.stderr[-2000:]
    (line,) = [line for line in result.stderr.splitlines() if "could not load it" in line]
    assert f"LLM_MODEL_PATH={twice}" in line
    assert "its vocabulary holds the token 'Hello' twice (ids 19556 and 49163)" in line
    assert "SIGABRT" not in result.stderr and "Traceback" not in result.stderr
