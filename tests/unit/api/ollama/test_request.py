"""Ollama's chat and generate bodies load once into the typed request their views serve."""

from __future__ import annotations

from dataclasses import replace

from flask import Flask
from flask.testing import FlaskClient

from app.api.ollama.catalog import served_name
from app.api.ollama.schemas import chat_schema, generate_schema
from app.settings.current import config_of
from tests.unit.api.anthropic.test_request import PNG
from tests.unit.conftest import MODEL_ID


def test_a_chat_body_becomes_the_chat_and_ollamas_own_fields(app: Flask) -> None:
    # No app context: the schema reads no configuration; the view resolves the name against it.
    asked = chat_schema.load(
        {
            "model": f"{MODEL_ID}:latest",
            "messages": [{"role": "user", "content": "hi"}],
            "options": {"num_ctx": 48, "num_predict": 5, "temperature": 0},
            "keep_alive": "5m",
            "think": True,
            "stream": False,
        }
    )
    assert asked.named == asked.model == f"{MODEL_ID}:latest"
    served = asked.served_as(served_name(asked.named, config_of(app).models))
    assert served.named == f"{MODEL_ID}:latest" and served.model == MODEL_ID  # the tag is the id
    assert served.chat == replace(asked.chat, model=MODEL_ID)
    assert asked.num_ctx == 48 and asked.keep_alive == 300 and asked.thinks
    assert asked.chat.max_tokens == 5 and not asked.chat.stream
    assert asked.chat.messages[-1]["content"] == "hi"
    assert (asked.prompt, asked.suffix, asked.raw) == ("", None, False)


def test_latest_is_the_id_itself_unless_a_model_answers_to_the_tagged_name(app: Flask) -> None:
    models = config_of(app).models
    assert served_name(f"{MODEL_ID}:latest", models) == MODEL_ID
    assert served_name(MODEL_ID, models) == MODEL_ID
    assert served_name("other:latest", models) == "other"  # found or refused by the model check after
    assert served_name(f"{MODEL_ID}:q4", models) == f"{MODEL_ID}:q4"  # only :latest is the id
    tagged = [replace(models[0], aliases=(f"{MODEL_ID}:latest",))]
    assert served_name(f"{MODEL_ID}:latest", tagged) == f"{MODEL_ID}:latest"


def test_a_generate_body_keeps_its_prompt_suffix_and_raw(app: Flask) -> None:
    with app.app_context():
        asked = generate_schema.load(
            {"model": MODEL_ID, "prompt": "def f(", "suffix": "return 1", "raw": True}
        )
    assert (asked.prompt, asked.suffix, asked.raw) == ("def f(", "return 1", True)
    assert asked.chat.stream and not asked.thinks and asked.num_ctx is None  # Ollama streams by default
    assert asked.chat.messages[-1] == {"role": "user", "content": "def f("}


def test_a_generate_body_is_parsed_once_its_images_decoded_once(
    decodes: list[str], client: FlaskClient
) -> None:
    # The view used to read the body for Ollama's load idiom, then parse it again to answer it.
    body = {"model": MODEL_ID, "prompt": "what is it?", "images": [PNG], "stream": False}
    answered = client.post("/api/generate", json=body)
    assert answered.status_code in (200, 400) and decodes == ["0"]  # the fake model may take no images
