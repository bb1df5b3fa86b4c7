"""schemathesis against a live server from its own OpenAPI document, shared by the suite's short
fuzz test and `make fuzz`'s long one: the server, the operations, the checks, one case runner."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app.settings.values import default_model_path
from harness import tiny_lora
from harness.servers import Server

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
OPERATIONS = [
    "POST /v1/chat/completions",
    "POST /v1/completions",
    "POST /v1/responses",
    "POST /v1/responses/input_tokens",
    "POST /v1/responses/compact",
    "GET /v1/responses/{response_id}",
    "DELETE /v1/responses/{response_id}",
    "GET /v1/responses/{response_id}/input_items",
    "POST /v1/responses/{response_id}/cancel",
    "POST /v1/conversations",
    "GET /v1/conversations/{conversation_id}",
    "POST /v1/conversations/{conversation_id}",
    "DELETE /v1/conversations/{conversation_id}",
    "GET /v1/conversations/{conversation_id}/items",
    "POST /v1/conversations/{conversation_id}/items",
    "GET /v1/conversations/{conversation_id}/items/{item_id}",
    "DELETE /v1/conversations/{conversation_id}/items/{item_id}",
    "POST /v1/files",
    "GET /v1/files",
    "GET /v1/files/{file_id}",
    "GET /v1/files/{file_id}/content",
    "DELETE /v1/files/{file_id}",
    "POST /v1/batches",
    "GET /v1/batches",
    "GET /v1/batches/{batch_id}",
    "POST /v1/batches/{batch_id}/cancel",
    "POST /v1/messages",
    "POST /v1/messages/count_tokens",
    "GET /v1/models",
    "GET /v1/models/{model_id}",
    "GET /health",
    "GET /health/ready",
    "GET /health/workers",
    "POST /v1/embeddings",
    "POST /v1/audio/transcriptions",
    "POST /audio/transcriptions",
    "POST /v1/rerank",
    "POST /rerank",
    "POST /v1/reranking",
    "POST /reranking",
    "POST /tokenize",
    "POST /detokenize",
    "GET /tokenizer_info",
    "POST /v1/chat/completions/input_tokens",
    "POST /apply-template",
    "GET /props",
    "POST /models/load",
    "POST /models/unload",
    "GET /lora-adapters",
    "POST /lora-adapters",
    "POST /v1/load_lora_adapter",
    "POST /v1/unload_lora_adapter",
    "POST /sleep",
    "POST /wake_up",
    "GET /is_sleeping",
    "POST /completion",
    "POST /completions",
    "POST /infill",
    "GET /slots",
    "GET /tools",
    "POST /tools",
    "POST /slots/{id_slot}",
    "POST /api/chat",
    "POST /api/generate",
    "POST /api/embed",
    "POST /api/embeddings",
    "POST /api/show",
    "GET /api/tags",
    "GET /api/ps",
    "GET /api/version",
    "POST /api/pull",
    "POST /api/push",
    "POST /api/create",
    "POST /api/copy",
    "DELETE /api/delete",
]
# Ollama's model management answers 501 by design (models come from LLM_MODELS), as do /infill
# for a model without FIM tokens and slot actions without LLM_SLOT_SAVE_PATH: documented
# answers, not a server failing.
BY_DESIGN_501 = {
    "POST /api/pull", "POST /api/push", "POST /api/create", "POST /api/copy", "DELETE /api/delete",
    "POST /infill", "POST /slots/{id_slot}",
}  # fmt: skip
STREAMING = {
    "POST /v1/chat/completions", "POST /v1/completions", "POST /v1/responses", "POST /v1/messages",
    "POST /completion", "POST /completions", "POST /infill", "POST /api/chat", "POST /api/generate",
}  # fmt: skip


TAKES_NOTHING = {"POST /wake_up"}


def runs() -> list[tuple[str, bool, GenerationMode]]:
    """Every operation; the generating ones in both stream modes; bodies valid and invalid."""
    return [
        (label, stream, mode)
        for label in OPERATIONS
        for stream in ((False, True) if label in STREAMING else (False,))
        for mode in (
            (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
            # A body or a query to break (the cancel and /wake_up take neither).
            if label.startswith("POST") and "{" not in label and label not in TAKES_NOTHING
            else (GenerationMode.POSITIVE,)
        )
    ]


def run_id(label: str, stream: bool, mode: GenerationMode) -> str:
    return f"{label}-{'event-stream' if stream else 'json'}-{mode.value}"


def fuzz_server() -> Server:
    """A chat model and an embedding model: requests for either may land on the other's worker.

    Small limits keep every generation short; the 2 s wall time bounds the rest.
    """
    models = [
        {"id": "chat", "path": default_model_path()},
        {"id": "embed", "path": default_model_path(), "embedding": True, "pooling": "mean"},
    ]
    return Server(
        LLM_MODELS=json.dumps(models),
        LLM_N_CTX="512",
        LLM_N_THREADS="1",
        LLM_MAX_TOKENS_LIMIT="8",
        LLM_MAX_GENERATION_SECONDS="2",
        LLM_MAX_QUEUE="64",
        # Adapters for the chat model lie here: a generated path may name one and load it.
        LLM_LORA_DIRS=str(tiny_lora.cached(default_model_path()).parent),
    ).wait_ready(answers=4)


@dataclass
class Tally:
    """What one run sent: cases, and statuses answered."""

    cases: int = 0
    statuses: Counter[int] = field(default_factory=Counter)


def fuzz(
    schema: schemathesis.BaseSchema,
    label: str,
    stream: bool,
    mode: GenerationMode,
    examples: int,
    derandomize: bool = True,
    tally: Tally | None = None,
) -> Tally:
    """Up to `examples` generated cases of one operation, each sent, checked and counted in `tally`;
    raises on the first failing check (a 5xx, or an answer the document does not describe)."""
    operation = schema.find_operation_by_label(label)
    assert operation is not None, label
    tally = Tally() if tally is None else tally

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=examples,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        database=None,
        derandomize=derandomize,  # in the suite: the same examples every run, a gate, not a lottery
    )
    def check(case: schemathesis.Case) -> None:
        if isinstance(case.body, dict) and label in STREAMING:
            case.body["stream"] = stream  # both stream modes, whatever else was generated
        tally.cases += 1
        checks = [c for c in CHECKS if c is not not_a_server_error] if label in BY_DESIGN_501 else CHECKS
        tally.statuses[case.call_and_validate(checks=checks).status_code] += 1

    check()
    return tally
