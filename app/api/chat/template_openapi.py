"""llama-server's template routes in the OpenAPI document: /apply-template and /props."""

from __future__ import annotations

from app.api.generation.memory_view import MEMORY_SCHEMA, SPECULATIVE_PROPERTIES
from app.api.http.openapi import MODEL_QUERY, json_doc, operation

_APPLIED = {"type": "object", "required": ["prompt"], "properties": {"prompt": {"type": "string"}}}
_PROPERTIES = {
    "type": "object",
    "required": ["model_alias", "total_slots", "chat_template", "chat_template_caps", "chat_format"],
    "properties": {
        "model_alias": {"type": "string"},
        "model_path": {"type": "string"},
        "total_slots": {"type": "integer"},
        "default_generation_settings": {"type": "object"},
        "chat_template": {"type": "string"},
        "chat_template_caps": {"type": "object", "additionalProperties": {"type": "boolean"}},
        "chat_format": {"type": "string", "description": "The tool-call format answers are read in"},
        "bos_token": {"type": "string"},
        "eos_token": {"type": "string"},
        "modalities": {
            "type": "object",
            "description": "What the model's projector takes in (LLM_MMPROJ): images, audio",
            "properties": {"vision": {"type": "boolean"}, "audio": {"type": "boolean"}},
        },
        "media_marker": {
            "type": "string",
            "description": "Where each multimodal_data item goes in /completion's prompt_string",
        },
        "audio_sample_rate": {
            "type": ["integer", "null"],
            "description": "The rate audio is resampled to before the projector hears it",
        },
        "is_sleeping": {"type": "boolean"},
        "memory": MEMORY_SCHEMA,
        "batch_invariant": {
            "type": "boolean",
            "description": "Answers do not depend on batching, the cache or threads (LLM_BATCH_INVARIANT)",
        },
        "speculative": {"type": "object", "properties": SPECULATIVE_PROPERTIES},
        "cpu_variant": {
            "type": ["string", "null"],
            "description": "The CPU kernels a portable build (the image's) loaded for this CPU, e.g. "
            "haswell or zen4; null where the build has one CPU backend built in",
        },
        "offload": {
            "type": ["object", "null"],
            "description": "Where llama.cpp's load put the model (LLM_N_GPU_LAYERS): the layers offloaded "
            "to a GPU of all, and each device buffer's MiB of weights (model) and KV cache (KV)",
            "properties": {
                "layers_offloaded": {"type": "integer"},
                "layers": {"type": "integer"},
                "buffers": {
                    "type": "object",
                    "additionalProperties": {"type": "object", "additionalProperties": {"type": "number"}},
                },
            },
        },
    },
}


# /apply-template's and /props' answers, beside the chat routes they share a blueprint with.
COMPONENTS = {"AppliedTemplate": _APPLIED, "Properties": _PROPERTIES}


APPLY_TEMPLATE = operation(
    "The prompt a chat request makes after the chat template, tools included (llama-server's)",
    json_doc("The prompt.", "AppliedTemplate"),
    (400, 401, 404, 406, 413, 500, 503),
    body="ChatCompletionRequest",
)
PROPS = operation(
    "A model's settings, chat template, its capabilities and tool-call format",
    json_doc("The properties.", "Properties"),
    (401, 404, 500, 503),
    parameters=[MODEL_QUERY],
)
