"""The API families, listed once: each one's blueprint (its routes) and its OpenAPI components."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from app.api.anthropic import openapi as anthropic_doc
from app.api.anthropic import routes as anthropic
from app.api.audio import openapi as audio_doc
from app.api.audio import routes as audio
from app.api.batches import openapi as batches_doc
from app.api.batches import routes as batches
from app.api.chat import openapi as chat_doc
from app.api.chat import routes as chat
from app.api.conversations import openapi as conversations_doc
from app.api.conversations import routes as conversations
from app.api.embeddings import openapi as embeddings_doc
from app.api.embeddings import routes as embeddings
from app.api.files import openapi as files_doc
from app.api.files import routes as files
from app.api.llama import openapi as llama_doc
from app.api.llama import routes as llama
from app.api.lora import openapi as lora_doc
from app.api.lora import routes as lora
from app.api.model_admin import openapi as model_admin_doc
from app.api.model_admin import routes as model_admin
from app.api.ollama import openapi as ollama_doc
from app.api.ollama import routes as ollama
from app.api.rerank import openapi as rerank_doc
from app.api.rerank import routes as rerank
from app.api.responses import openapi as responses_doc
from app.api.responses import routes as responses
from app.api.sleep import openapi as sleep_doc
from app.api.sleep import routes as sleep
from app.api.slots import openapi as slots_doc
from app.api.slots import routes as slots
from app.api.status import openapi as status_doc
from app.api.status import routes as status
from app.api.tokens import openapi as tokens_doc
from app.api.tokens import routes as tokens
from app.api.tools import openapi as tools_doc
from app.api.tools import routes as tools


@dataclass(frozen=True)
class Family:
    """One API family: `routes.bp` is its blueprint, whose views declare their operations;
    `document.COMPONENTS` the schemas they refer to (and `MODEL_NAMES`, the requests that
    must name a served model: "generate", "embed" or "any")."""

    routes: ModuleType
    document: ModuleType


# In the OpenAPI document's order (and the blueprints' registration order).
FAMILIES = (
    Family(chat, chat_doc),
    Family(llama, llama_doc),
    Family(responses, responses_doc),
    Family(conversations, conversations_doc),
    Family(files, files_doc),
    Family(batches, batches_doc),
    Family(anthropic, anthropic_doc),
    Family(embeddings, embeddings_doc),
    Family(audio, audio_doc),
    Family(rerank, rerank_doc),
    Family(tokens, tokens_doc),
    Family(status, status_doc),
    Family(model_admin, model_admin_doc),
    Family(lora, lora_doc),
    Family(sleep, sleep_doc),
    Family(slots, slots_doc),
    Family(tools, tools_doc),
    Family(ollama, ollama_doc),
)
