"""Images in chat completions: the real server with a projector beside SmolLM2 and Gemma 3 270M, the
openai SDK, and llama-server built from the same sdist answering the same requests.

The projectors are random-weight (harness/tiny_projector.py), so the answers are nonsense: what is
compared is their equality with llama-server's at temperature 0 (the image's tokens counted the same,
the same answer whole and streamed), what the prompt cache reuses (the same image again: past it;
another image: up to it), and the errors a client can cause.
"""

from __future__ import annotations

import base64
import http.server
import io
import json
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import ollama
import openai
import pytest
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI
from PIL import Image

from app.settings.values import default_model_path
from harness import llama_server, tiny_projector
from harness.real_models import gemma3_path
from harness.servers import Server, Service, serving_models
from tests.support import same_media
from tests.support.audio import tone
from tests.support.clients import openai_client

QUESTION = "What is in this picture?"
IMAGE_TOKENS = tiny_projector.IMAGE_TOKENS


def bases() -> dict[str, str]:
    return {"smol": default_model_path(), "gemma": str(gemma3_path())}


def data_url(data: bytes, kind: str = "image/jpeg") -> str:
    return f"data:{kind};base64,{base64.b64encode(data).decode()}"


def png(colour: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (80, 60), colour).save(out, format="PNG")
    return out.getvalue()


JPEG = tiny_projector.media("test-1.jpeg").read_bytes()
RED, BLUE = png((200, 30, 30)), png((30, 30, 200))


def asking(*images: bytes, text: str = QUESTION) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    parts += [
        {"type": "image_url", "image_url": {"url": data_url(image), "detail": "auto"}} for image in images
    ]
    return [{"role": "user", "content": parts}]


class ImageHost:
    """A local HTTP server of images, for the URL tests: an image, redirects, an endless one."""

    def __init__(self) -> None:
        self.released = threading.Event()
        host = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                port = self.server.server_address[1]
                routes = {
                    "/red.png": (200, RED, {}),
                    "/same-host": (302, b"", {"Location": "/red.png"}),
                    "/other-host": (302, b"", {"Location": f"http://localhost:{port}/red.png"}),
                    "/missing": (404, b"", {}),
                }
                if self.path == "/stalls":  # headers, then nothing until the test ends
                    self.send_response(200)
                    self.send_header("Content-Length", "1000")
                    self.end_headers()
                    self.wfile.flush()
                    host.released.wait(60)
                    return
                status, body, headers = routes.get(self.path, (404, b"", {}))
                self.send_response(status)
                for name, value in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


def test_a_cache_control_breakpoint_after_an_image_is_counted_and_the_worker_lives(vision: Server) -> None:
    """A Messages request whose image comes before a `cache_control` mark (Claude Code's screenshots):
    answered, and the same request again reads its prompt from the cache. The image's placeholders
    are no tokens of the vocabulary, which llama.cpp's token_to_piece aborts the process on: a prompt
    with media counts no breakpoint, and the tokenizer's reads of pieces stop at a placeholder too."""
    source = {"type": "base64", "media_type": "image/png", "data": base64.b64encode(RED).decode()}
    content = [
        {"type": "image", "source": source},
        {"type": "text", "text": QUESTION, "cache_control": {"type": "ephemeral"}},
    ]
    with anthropic.Anthropic(base_url=vision.url, api_key="unused", max_retries=0) as claude:
        ask = {"model": "smol", "max_tokens": 4, "messages": [{"role": "user", "content": content}]}
        first = claude.messages.create(**ask, extra_body={"temperature": 0})
        again = claude.messages.create(**ask, extra_body={"temperature": 0})
    assert first.stop_reason in ("max_tokens", "end_turn") and again.content == first.content
    assert (again.usage.cache_read_input_tokens or 0) > 0
    assert "terminate called" not in vision.output() and "exited" not in vision.output()


@pytest.fixture(scope="module")
def image_host() -> Iterator[ImageHost]:
    host = ImageHost()
    yield host
    host.close()


@pytest.fixture(scope="module")
def vision(image_host: ImageHost) -> Iterator[Server]:
    """Each model with its projector, on a worker of its own, two sequences each; media limits just
    above what the tests send, and URLs fetched from the local image host (by address, and by a name
    that resolves to loopback, which is refused)."""
    models = [
        {"id": name, "path": path, "mmproj": str(tiny_projector.cached(path)), "parallel": 2}
        for name, path in bases().items()
    ]
    limits = {
        "LLM_MAX_MEDIA_BYTES": str(len(JPEG) + 1000),
        "LLM_MAX_IMAGE_PIXELS": str(640 * 488),  # the JPEG's own size
        "LLM_MAX_MEDIA_PARTS": "3",
        "LLM_MEDIA_FETCH": f"127.0.0.1:{image_host.port},localhost:{image_host.port}",
        "LLM_MEDIA_FETCH_TIMEOUT": "2",
    }
    # The reproducible kernels: answers are compared with llama-server's bit for bit.
    with serving_models(models, LLM_BATCH_INVARIANT="1", **limits) as server:
        yield server


@pytest.fixture(scope="module", params=["smol", "gemma"])
def reference(request: pytest.FixtureRequest) -> Iterator[tuple[str, Service]]:
    """llama-server on the same model and projector, with the kernels and the full-size sliding-window
    cache ours runs by default."""
    path = bases()[request.param]
    extra = ("--mmproj", str(tiny_projector.cached(path)), "--swa-full")
    # Its media marker pinned to mtmd's default, which ours takes in /completion's multimodal form.
    marker = {"LLAMA_MEDIA_MARKER": "<__media__>"}
    service = llama_server.start(path, 1, 2, 2048, extra, same_kernels=True, environment=marker)
    yield request.param, service
    service.stop()


@pytest.fixture
def sdk(vision: Server) -> Iterator[openai.OpenAI]:
    with openai_client(vision) as client:
        yield client


def theirs(service: Service, messages: list[dict[str, Any]], tokens: int = 16) -> dict[str, Any]:
    # The pixels this server decodes, as a PNG: llama-server's stb_image reads a JPEG a few levels apart.
    body = {"messages": same_media.messages(messages), "max_tokens": tokens, "temperature": 0}
    answer = httpx.post(service.url + "/v1/chat/completions", json=body, timeout=120)
    answer.raise_for_status()
    result: dict[str, Any] = answer.json()
    return result


def ours(sdk: openai.OpenAI, model: str, messages: list[dict[str, Any]], tokens: int = 16) -> Any:
    return sdk.chat.completions.create(model=model, messages=messages, max_tokens=tokens, temperature=0)


@pytest.mark.parametrize("images", [(JPEG,), (RED, BLUE)], ids=["one image", "two images"])
def test_an_answer_about_images_equals_llama_servers_whole_and_streamed(
    sdk: openai.OpenAI, reference: tuple[str, Service], images: tuple[bytes, ...]
) -> None:
    model, service = reference
    messages = asking(*images)
    expected = theirs(service, messages)
    whole = ours(sdk, model, messages)
    assert whole.choices[0].message.content == expected["choices"][0]["message"]["content"]
    assert whole.usage.prompt_tokens == expected["usage"]["prompt_tokens"]
    text_only = ours(sdk, model, [{"role": "user", "content": QUESTION}], tokens=1).usage.prompt_tokens
    assert whole.usage.prompt_tokens >= text_only + len(images) * IMAGE_TOKENS
    stream = sdk.chat.completions.create(
        model=model,
        messages=messages,
        max_tokens=16,
        temperature=0,
        stream=True,
    )
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert streamed == whole.choices[0].message.content


def test_a_second_turn_about_the_same_image_is_served_from_the_cache_and_answers_as_llama_server(
    sdk: openai.OpenAI, reference: tuple[str, Service]
) -> None:
    model, service = reference
    first = asking(RED, text="Describe it.")
    answer = ours(sdk, model, first).choices[0].message.content
    follow_up = [
        *first,
        {"role": "assistant", "content": answer},
        {"role": "user", "content": "And its colour?"},
    ]
    again = ours(sdk, model, follow_up)
    cached = again.usage.prompt_tokens_details.cached_tokens
    # Past the image: its cells were reused, not evaluated again (a sliding window resumes from a
    # checkpoint a few tokens before the prompt's end at the latest, which lies past the image).
    text_before = ours(
        sdk, model, [{"role": "user", "content": "Describe it."}], tokens=1
    ).usage.prompt_tokens
    assert cached > text_before + IMAGE_TOKENS - 4, (cached, text_before)
    assert again.choices[0].message.content == theirs(service, follow_up)["choices"][0]["message"]["content"]


def test_another_image_is_never_answered_from_the_cache_of_the_first(
    sdk: openai.OpenAI, reference: tuple[str, Service]
) -> None:
    model, service = reference
    ours(sdk, model, asking(RED, text="Which colour?"))
    theirs(service, asking(RED, text="Which colour?"))
    other = ours(sdk, model, asking(BLUE, text="Which colour?"))
    expected = theirs(service, asking(BLUE, text="Which colour?"))
    # As llama-server's: the text before the image (the image's opening marker included) comes from
    # the cache, the image itself and all after it are evaluated anew.
    cached = other.usage.prompt_tokens_details.cached_tokens
    assert cached == expected["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached < other.usage.prompt_tokens - IMAGE_TOKENS
    assert other.choices[0].message.content == expected["choices"][0]["message"]["content"]


@pytest.mark.parametrize("length", ["long", "short"])
@pytest.mark.parametrize("model", ["smol", "gemma"])
def test_conversations_about_two_images_keep_their_caches_side_by_side(
    sdk: openai.OpenAI, model: str, length: str
) -> None:
    # The second conversation shares the first's text before its image, so it takes the first's
    # sequence; the first's cells (its image among them) go to the host cache and come back for its
    # follow-up, as two text conversations' do: no image is evaluated twice. Short: a question of
    # three words and the image, under a block of the host cache (kept all the same for its image).
    text = f"Look at the picture below, {model}, and describe what you see in it in a few words, " * 2
    if length == "short":
        text = f"Describe it, {model}."
    first = {colour: asking(image, text=text) for colour, image in (("red", RED), ("blue", BLUE))}
    answers = {}
    for colour, messages in first.items():
        raw = sdk.chat.completions.with_raw_response.create(
            model=model,
            messages=messages,
            max_tokens=8,
            temperature=0,
        )
        answers[colour] = raw.parse()
        if colour == "blue" and length == "long":  # it left red's cached prompt at red's image: said
            assert "X-Cache-Miss" in raw.headers and raw.headers["X-Cache-Miss"].endswith("role=user")
    for colour, messages in first.items():
        answer = answers[colour]
        follow_up = [*messages, {"role": "assistant", "content": answer.choices[0].message.content},
                     {"role": "user", "content": "And its colour?"}]  # fmt: skip
        again = ours(sdk, model, follow_up)
        assert again.usage.prompt_tokens_details.cached_tokens >= answer.usage.prompt_tokens, colour


def test_several_choices_and_logprobs_on_an_image_prompt(sdk: openai.OpenAI) -> None:
    answer = sdk.chat.completions.create(
        model="smol",
        messages=asking(JPEG),
        max_tokens=8,
        temperature=0,
        n=2,
        logprobs=True,
        top_logprobs=2,
    )
    first, second = answer.choices
    assert first.message.content == second.message.content
    assert first.logprobs is not None and len(first.logprobs.content or []) > 0
    assert all(len(entry.top_logprobs) == 2 for entry in first.logprobs.content or [])


def bad_request(url: str, model: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    body = {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 4}
    answer = httpx.post(url + "/v1/chat/completions", json=body, timeout=60)
    assert answer.status_code == 400, answer.text
    error: dict[str, Any] = answer.json()["error"]
    return error


def test_media_a_client_gets_wrong_are_clear_400s_and_a_stream_beside_them_goes_on(vision: Server) -> None:
    body = {"model": "smol", "messages": asking(JPEG), "max_tokens": 24, "temperature": 0, "stream": True}
    with httpx.stream("POST", vision.url + "/v1/chat/completions", json=body, timeout=120) as stream:
        events = stream.iter_lines()
        assert next(line for line in events if line.startswith("data: {"))  # it has started
        text = {"type": "text", "text": "Look:"}
        noise = {"type": "image_url", "image_url": {"url": data_url(b"not an image at all" * 10)}}
        assert "not an image this server reads" in bad_request(vision.url, "smol", [text, noise])["message"]
        truncated = {"type": "image_url", "image_url": {"url": data_url(RED[:60])}}  # a PNG header, no pixels
        assert (
            "is not an image this server decodes"
            in bad_request(vision.url, "smol", [text, truncated])["message"]
        )
        broken = {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}
        error = bad_request(vision.url, "smol", [text, broken])
        assert "base64" in error["message"] and error["param"] == "messages[0].content[1].image_url"
        audio = {
            "type": "input_audio",
            "input_audio": {"data": base64.b64encode(tone(0.2)).decode(), "format": "wav"},
        }
        assert "cannot take audio" in bad_request(vision.url, "smol", [text, audio])["message"]
        rest = [line for line in events if line.startswith("data: ")]
    assert rest[-1] == "data: [DONE]"
    endings = [choice["finish_reason"] for line in rest[:-1] for choice in json.loads(line[6:])["choices"]]
    assert "length" in endings  # all its 24 tokens
    with openai_client(vision) as client:
        assert ours(client, "smol", asking(JPEG), tokens=2).choices[0].finish_reason == "length"


def test_a_text_only_model_refuses_an_image_naming_itself(server: Server) -> None:
    image = {"type": "image_url", "image_url": {"url": data_url(JPEG)}}
    model = httpx.get(server.url + "/v1/models", timeout=30).json()["data"][0]["id"]
    error = bad_request(server.url, model, [{"type": "text", "text": QUESTION}, image])
    assert "reads text only" in error["message"] and "image" in error["message"]
    assert "SmolLM2" in error["message"]


def image_first(image: bytes, text: str) -> list[dict[str, Any]]:
    """The OpenAI form of a message whose image comes before its text (as Ollama places images)."""
    parts = [{"type": "image_url", "image_url": {"url": data_url(image)}}, {"type": "text", "text": text}]
    return [{"role": "user", "content": parts}]


def test_each_family_takes_an_image_in_its_own_form_and_answers_as_chat_completions(
    sdk: openai.OpenAI, vision: Server
) -> None:
    expected = ours(sdk, "smol", asking(RED)).choices[0].message.content
    with anthropic.Anthropic(base_url=vision.url, api_key="unused", max_retries=0) as claude:
        source = {"type": "base64", "media_type": "image/png", "data": base64.b64encode(RED).decode()}
        message = claude.messages.create(
            model="smol",
            max_tokens=16,
            extra_body={"temperature": 0},
            messages=[
                {
                    "role": "user",
                    "content": [{"type": "text", "text": QUESTION}, {"type": "image", "source": source}],
                }
            ],
        )
    assert message.content[0].text == expected
    # Anthropic's input_tokens leave out what was read from the cache.
    read = message.usage.cache_read_input_tokens or 0
    assert message.usage.input_tokens + read == ours(sdk, "smol", asking(RED), tokens=1).usage.prompt_tokens
    response = sdk.responses.create(
        model="smol",
        max_output_tokens=16,
        temperature=0,
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": QUESTION},
                    {"type": "input_image", "image_url": data_url(RED), "detail": "auto"},
                ],
            }
        ],
    )
    assert response.output_text == expected
    options = {"temperature": 0, "num_predict": 16}
    with ollama.Client(host=vision.url) as client:
        answered = client.chat(
            model="smol", messages=[{"role": "user", "content": QUESTION, "images": [RED]}], options=options
        )
        generated = client.generate(model="smol", prompt=QUESTION, images=[RED], options=options)
    first = ours(sdk, "smol", image_first(RED, QUESTION)).choices[0].message.content
    assert answered.message.content == first
    assert generated.response == first


def test_a_stored_response_keeps_its_image_for_the_next_turn_and_lists_it(sdk: openai.OpenAI) -> None:
    content = [{"type": "input_text", "text": "Look."}, {"type": "input_image", "image_url": data_url(BLUE)}]
    first = sdk.responses.create(
        model="smol",
        max_output_tokens=8,
        temperature=0,
        store=True,
        input=[{"role": "user", "content": content}],
    )
    items = sdk.responses.input_items.list(first.id).data
    parts = [part.type for part in items[0].content]
    assert parts == ["input_text", "input_image"]
    assert items[0].content[1].image_url == data_url(BLUE).replace("image/jpeg", "image/png")
    second = sdk.responses.create(
        model="smol", max_output_tokens=8, temperature=0, previous_response_id=first.id, input="Again?"
    )
    assert second.usage is not None and second.usage.input_tokens > IMAGE_TOKENS
    assert second.usage.input_tokens_details.cached_tokens > IMAGE_TOKENS


def test_the_models_say_what_they_take_in(vision: Server, server: Server) -> None:
    listed = {m["id"]: m for m in httpx.get(vision.url + "/v1/models", timeout=30).json()["data"]}
    assert listed["smol"]["modalities"] == listed["gemma"]["modalities"] == {"vision": True, "audio": False}
    props = httpx.get(vision.url + "/props", params={"model": "gemma"}, timeout=30).json()
    assert props["modalities"] == {"vision": True, "audio": False} and props["audio_sample_rate"] is None
    assert props["media_marker"] == "<__media__>"
    shown = httpx.post(vision.url + "/api/show", json={"model": "smol"}, timeout=30).json()
    assert "vision" in shown["capabilities"]
    # A text-only model says so everywhere.
    plain = httpx.get(server.url + "/v1/models", timeout=30).json()["data"][0]
    assert plain["modalities"] == {"vision": False, "audio": False}
    assert httpx.get(server.url + "/props", timeout=30).json()["modalities"] == {
        "vision": False,
        "audio": False,
    }
    shown = httpx.post(server.url + "/api/show", json={"model": plain["id"]}, timeout=30).json()
    assert "vision" not in shown["capabilities"]


def image_part(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def test_media_urls_are_fetched_only_from_listed_hosts_at_public_or_listed_addresses(
    sdk: openai.OpenAI, vision: Server, server: Server, image_host: ImageHost
) -> None:
    text = {"type": "text", "text": QUESTION}
    # Off by default: the server without LLM_MEDIA_FETCH says how to turn it on.
    model = httpx.get(server.url + "/v1/models", timeout=30).json()["data"][0]["id"]
    assert (
        "LLM_MEDIA_FETCH"
        in bad_request(server.url, model, [text, image_part(image_host.url("/red.png"))])["message"]
    )
    # Listed by address: fetched, and answered as the same image sent inline.
    fetched = ours(sdk, "smol", [{"role": "user", "content": [text, image_part(image_host.url("/red.png"))]}])
    assert fetched.choices[0].message.content == ours(sdk, "smol", asking(RED)).choices[0].message.content
    redirected = [text, image_part(image_host.url("/same-host"))]
    assert ours(sdk, "smol", [{"role": "user", "content": redirected}]).choices[0].message.content
    refusals = {
        image_host.url("/other-host"): "another host",
        image_host.url("/red.png", host="localhost"): "private or loopback",
        f"http://127.0.0.2:{image_host.port}/red.png": "LLM_MEDIA_FETCH",
        image_host.url("/missing"): "404",
        image_host.url("/stalls"): "LLM_MEDIA_FETCH_TIMEOUT",
        "ftp://127.0.0.1/red.png": "data URL",
    }
    for url, says in refusals.items():
        assert says in bad_request(vision.url, "smol", [text, image_part(url)])["message"], url


def test_each_media_limit_is_a_clear_error_naming_it(vision: Server) -> None:
    text = {"type": "text", "text": QUESTION}
    noise = random.Random(0).randbytes(320 * 240 * 3)
    big = io.BytesIO()
    Image.frombytes("RGB", (320, 240), noise).save(big, format="PNG")  # noise does not compress
    body = {
        "model": "smol",
        "messages": [{"role": "user", "content": [text, image_part(data_url(big.getvalue()))]}],
    }
    answer = httpx.post(vision.url + "/v1/chat/completions", json=body, timeout=60)
    assert answer.status_code == 413 and "LLM_MAX_MEDIA_BYTES" in answer.json()["error"]["message"]
    wide = io.BytesIO()
    Image.new("RGB", (2000, 2000), (1, 2, 3)).save(wide, format="PNG")
    assert (
        "LLM_MAX_IMAGE_PIXELS"
        in bad_request(vision.url, "smol", [text, image_part(data_url(wide.getvalue()))])["message"]
    )
    many = [text, *[image_part(data_url(RED))] * 4]
    assert "LLM_MAX_MEDIA_PARTS" in bad_request(vision.url, "smol", many)["message"]


def test_structured_output_and_tool_calls_hold_on_an_image_prompt(sdk: openai.OpenAI) -> None:
    schema = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
    shaped = sdk.chat.completions.create(
        model="smol",
        messages=asking(RED, text="Which colour is it? Answer in JSON."),
        max_tokens=40,
        temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "colour", "schema": schema}},
    )
    assert isinstance(json.loads(shaped.choices[0].message.content or "")["colour"], str)
    tool = {
        "type": "function",
        "function": {"name": "name_colour", "parameters": schema},
    }
    called = sdk.chat.completions.create(
        model="smol",
        messages=asking(RED, text="Name its colour with the tool."),
        max_tokens=40,
        temperature=0,
        tools=[tool],
        tool_choice="required",
    )
    (call,) = called.choices[0].message.tool_calls or []
    assert call.function.name == "name_colour"
    assert isinstance(json.loads(call.function.arguments)["colour"], str)


def test_llama_servers_own_multimodal_completion_form_answers_as_llama_server(
    vision: Server, reference: tuple[str, Service]
) -> None:
    model, service = reference
    data = base64.b64encode(RED).decode()
    body = {
        "prompt": {"prompt_string": "An image: <__media__> It shows", "multimodal_data": [data]},
        "n_predict": 12,
        "temperature": 0,
    }
    theirs = httpx.post(service.url + "/completion", json=body, timeout=120).json()
    mine = httpx.post(vision.url + "/completion", json={**body, "model": model}, timeout=120).json()
    assert mine["content"] == theirs["content"]
    assert mine["tokens_evaluated"] == theirs["tokens_evaluated"]
    two_markers = {
        **body,
        "prompt": {"prompt_string": "<__media__> and <__media__>", "multimodal_data": [data]},
    }
    refused = httpx.post(vision.url + "/completion", json={**two_markers, "model": model}, timeout=60)
    assert refused.status_code == 400 and "markers" in refused.json()["error"]["message"]


def test_langchains_chat_openai_sends_an_image_part(sdk: openai.OpenAI, vision: Server) -> None:
    parts = [{"type": "text", "text": QUESTION}, {"type": "image_url", "image_url": {"url": data_url(RED)}}]
    with httpx.Client() as transport:  # closed here, not left to the garbage collector
        chat = ChatOpenAI(
            base_url=vision.url + "/v1",
            api_key="unused",
            model="smol",
            temperature=0,
            max_completion_tokens=16,
            max_retries=0,
            http_client=transport,
        )
        answer = chat.invoke([HumanMessage(content=parts)])
    assert answer.content == ours(sdk, "smol", asking(RED)).choices[0].message.content


def test_a_model_that_sleeps_and_wakes_leaves_no_thread_behind(sdk: openai.OpenAI, vision: Server) -> None:
    """Each wake makes the projector's thread for prompts with media again; each sleep ends it.
    (Last in the module: the models sleep.)"""

    def threads_after_an_image() -> int:
        ours(sdk, "smol", asking(RED), tokens=2)  # wakes the model, and makes the thread
        (model,) = [
            m for m in httpx.get(vision.url + "/v1/models", timeout=10).json()["data"] if m["id"] == "smol"
        ]
        (worker,) = model["workers"]
        return settled(Path(f"/proc/{worker['pid']}/task"))

    def settled(tasks: Path) -> int:
        """The worker's thread count once it holds for a second (at most ten): a thread that has done
        its part (a load's) may take a moment to end after the answer, and is no leak."""
        count, since, deadline = len(list(tasks.iterdir())), time.monotonic(), time.monotonic() + 10
        while time.monotonic() - since < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
            now = len(list(tasks.iterdir()))
            if now != count:
                count, since = now, time.monotonic()
        return count

    counts = []
    for _ in range(3):
        counts.append(threads_after_an_image())
        assert httpx.post(vision.url + "/sleep", timeout=60).status_code == 200
    assert counts[2] <= counts[1] <= counts[0], counts  # a wake after the first adds none for good


def test_an_image_is_decoded_by_pillow_never_by_llama_cpps_stb_image(
    sdk: openai.OpenAI, reference: tuple[str, Service]
) -> None:
    # WebP, which stb_image cannot read: answered as llama-server answers the same pixels as a PNG.
    model, service = reference
    out = io.BytesIO()
    Image.open(io.BytesIO(RED)).save(out, format="WEBP", lossless=True)
    webp = out.getvalue()
    parts = [{"type": "text", "text": QUESTION}, {"type": "image_url", "image_url": {"url": data_url(webp)}}]
    whole = ours(sdk, model, [{"role": "user", "content": parts}])
    assert (
        whole.choices[0].message.content == theirs(service, asking(RED))["choices"][0]["message"]["content"]
    )
