"""Ollama's API through Ollama's own Python library, unchanged, and raw NDJSON, against the real server.

One gunicorn with a chat model and an embedding model (the default GGUF with mean pooling).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import jsonschema
import numpy as np
import ollama
import pytest

from app.settings.values import default_model_path
from harness.servers import Server, serving_models
from tests.support.clients import WEATHER
from tests.support.rawhttp import open_request, read_chunk, read_head
from tests.support.waits import wait_for_log, wait_until

CHAT, EMBED, THINKER = "smol", "smol-embed", "r1"
# A real 8x8 PNG (base64), for the image refusals: a text-only model, a suffix.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAEklEQVR4nGP4z8CAFTEMLQkAJtM/wXr3ioUAAAAASUVORK5CYII="
TEMPLATES = Path(__file__).parents[2] / "data" / "templates"
# LlamaIndex's own venv (Makefile: install-test): it needs marshmallow < 4.
LLAMAINDEX = Path(sys.executable).parent.parent / "llamaindex" / "bin" / "python"
GREEDY = {"temperature": 0, "seed": 7, "num_predict": 16}


@pytest.fixture(scope="module")
def ollama_server() -> Iterator[Server]:
    """A chat model, an embedding model and a thinking one: the default model with DeepSeek R1's
    template, whose prompt ends inside <think> (it never closes its thinking by itself: the
    server's reasoning budget, 8 tokens, closes it)."""
    r1 = (TEMPLATES / "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja").read_text()
    models = [
        {"id": CHAT, "path": default_model_path(), "workers": 1, "n_ctx": 1024},
        {"id": EMBED, "path": default_model_path(), "embedding": True, "pooling": "mean", "n_ctx": 256},
        {"id": THINKER, "path": default_model_path(), "workers": 1, "n_ctx": 1024, "chat_template": r1},
    ]
    with serving_models(models, answers=9, LLM_REASONING_BUDGET="8") as server:
        yield server


@pytest.fixture
def client(ollama_server: Server) -> Iterator[ollama.Client]:
    with ollama.Client(host=ollama_server.url) as sdk:
        yield sdk


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_chat_whole_and_streamed_give_the_same_answer(client: ollama.Client) -> None:
    started = time.monotonic()
    whole = client.chat(model=CHAT, messages=ask("Name a colour."), options=GREEDY, stream=False)
    wall_ns = (time.monotonic() - started) * 1e9
    assert whole.message.role == "assistant" and whole.message.content
    assert whole.done and whole.done_reason in ("stop", "length") and 0 < whole.eval_count <= 16
    assert whole.prompt_eval_count > 0 and 0 < whole.total_duration <= wall_ns
    assert whole.prompt_eval_duration + whole.eval_duration <= whole.total_duration
    parts = list(client.chat(model=CHAT, messages=ask("Name a colour."), options=GREEDY, stream=True))
    assert all(not part.done for part in parts[:-1]) and parts[-1].done
    assert "".join(part.message.content or "" for part in parts) == whole.message.content
    assert parts[-1].eval_count == whole.eval_count


def test_generate_through_the_template_raw_and_with_a_system_prompt(
    client: ollama.Client, ollama_server: Server
) -> None:
    templated = client.generate(model=CHAT, prompt="Say hello.", options=GREEDY, stream=False)
    assert templated.response and templated.done
    streamed = list(client.generate(model=CHAT, prompt="Say hello.", options=GREEDY, stream=True))
    assert "".join(part.response for part in streamed) == templated.response and streamed[-1].done
    tagged = client.generate(model=f"{CHAT}:latest", prompt="Say hello.", options=GREEDY, stream=False)
    assert tagged.response == templated.response and tagged.model == f"{CHAT}:latest"  # echoed as asked
    raw = client.generate(model=CHAT, prompt="The sky is", raw=True, options=GREEDY, stream=False)
    assert raw.response and raw.response != templated.response
    # A prompt the client templated itself, sent raw, is the template's own (special tokens parsed).
    asked = {"model": CHAT, "messages": ask("Say hello.")}
    rendered = httpx.post(ollama_server.url + "/apply-template", json=asked, timeout=30).json()["prompt"]
    assert "<|im_start|>" in rendered
    by_hand = client.generate(model=CHAT, prompt=rendered, raw=True, options=GREEDY, stream=False)
    assert by_hand.response == templated.response
    system = client.generate(model=CHAT, prompt="Say hello.", system="Answer in French.", options=GREEDY,
                             stream=False)  # fmt: skip
    assert system.response != templated.response
    limited = client.generate(model=CHAT, prompt="Count to fifty.", options={"num_predict": 3}, stream=False)
    assert limited.eval_count == 3 and limited.done_reason == "length"


def test_structured_output_follows_the_schema(client: ollama.Client) -> None:
    name = {"type": "string", "maxLength": 20}  # a small model left alone may never close its string
    properties = {"name": name, "age": {"type": "integer"}}
    schema = {"type": "object", "properties": properties, "required": ["name", "age"]}
    answer = client.chat(model=CHAT, messages=ask("Invent a person."), format=schema,
                         options={"seed": 1, "temperature": 0}, stream=False)  # fmt: skip
    jsonschema.validate(json.loads(answer.message.content), schema)
    any_json = client.generate(model=CHAT, prompt="Give me JSON.", format="json",
                               options={"seed": 1, "num_predict": 48}, stream=False)  # fmt: skip
    assert any_json.response.lstrip().startswith("{")  # held to JSON from its first token
    if any_json.done_reason == "stop":  # (a small model may write on past 48 tokens)
        assert isinstance(json.loads(any_json.response), dict)


def test_a_conversation_with_tools_and_their_results_is_answered(client: ollama.Client) -> None:
    messages = [
        *ask("What is the weather in Paris?"),
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get_weather",
                                                                           "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "content": "Sunny, 21 degrees.", "tool_name": "get_weather"},
    ]  # fmt: skip
    answer = client.chat(model=CHAT, messages=messages, tools=[WEATHER], options=GREEDY, stream=False)
    assert answer.done and (answer.message.content or answer.message.tool_calls)
    for call in answer.message.tool_calls or []:
        assert call.function.name == "get_weather" and isinstance(call.function.arguments, dict)


def test_a_tool_call_forced_by_format_comes_back_as_ollamas_tool_calls(client: ollama.Client) -> None:
    # Ollama has no tool_choice: a client forces a call by a format its answer must follow.
    city = {"type": "string", "maxLength": 20}
    call = {"type": "object", "required": ["name", "arguments"], "properties": {
        "name": {"const": "get_weather"},
        "arguments": {"type": "object", "properties": {"city": city}, "required": ["city"]},
    }}  # fmt: skip
    asked = {"model": CHAT, "messages": ask("What is the weather in Paris?"), "tools": [WEATHER],
             "format": call, "options": {"temperature": 0, "num_predict": 64}}  # fmt: skip
    whole = client.chat(**asked, stream=False)
    (made,) = whole.message.tool_calls
    assert made.function.name == "get_weather" and isinstance(made.function.arguments["city"], str)
    assert not whole.message.content  # the call, not its JSON as text
    parts = list(client.chat(**asked, stream=True))
    streamed = [call for part in parts for call in part.message.tool_calls or []]
    assert [(c.function.name, c.function.arguments) for c in streamed] == [
        (made.function.name, made.function.arguments)
    ]
    assert parts[-1].done and not "".join(part.message.content or "" for part in parts)


def test_a_call_cut_off_comes_back_as_text_not_as_a_broken_call(client: ollama.Client) -> None:
    # Ollama only reports calls it could parse, and its clients take arguments as an object.
    call = {"type": "object", "required": ["name", "arguments"], "properties": {
        "name": {"const": "get_weather"},
        "arguments": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }}  # fmt: skip
    asked = {"model": CHAT, "messages": ask("What is the weather in Paris?"), "tools": [WEATHER],
             "format": call, "options": {"temperature": 0, "num_predict": 8}}  # fmt: skip
    whole = client.chat(**asked, stream=False)
    assert whole.done_reason == "length" and not whole.message.tool_calls
    assert whole.message.content.lstrip().startswith("{")
    parts = list(client.chat(**asked, stream=True))
    assert not any(part.message.tool_calls for part in parts)
    assert "".join(part.message.content or "" for part in parts) == whole.message.content


def test_a_thinking_model_thinks_apart_and_a_model_that_cannot_says_so(client: ollama.Client) -> None:
    asked = {"model": THINKER, "messages": ask("Name a colour."), "think": True, "options": {**GREEDY,
             "num_predict": 40}}  # fmt: skip
    whole = client.chat(**asked, stream=False)
    assert whole.message.thinking and whole.message.content  # 8 tokens of thinking, then the answer
    assert "<think>" not in whole.message.content + whole.message.thinking
    assert "</think>" not in whole.message.content + whole.message.thinking
    parts = list(client.chat(**asked, stream=True))
    assert "".join(part.message.thinking or "" for part in parts) == whole.message.thinking
    assert "".join(part.message.content or "" for part in parts) == whole.message.content
    generated = client.generate(model=THINKER, prompt="Name a colour.", think=True, options=GREEDY)
    assert generated.thinking and "</think>" not in generated.thinking + generated.response
    assert "thinking" in client.show(THINKER).capabilities
    assert "thinking" not in client.show(CHAT).capabilities
    with pytest.raises(ollama.ResponseError) as refused:
        client.chat(model=CHAT, messages=ask("Hi."), think=True, options=GREEDY)
    assert refused.value.status_code == 400 and "does not support thinking" in refused.value.error
    assert client.chat(model=CHAT, messages=ask("Hi."), think=False, options=GREEDY).message.content


@pytest.fixture(scope="module")
def fim_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default model, its GGUF told that three of its special tokens (<issue_start>,
    <issue_comment>, <issue_closed>) are fill-in-the-middle's <pre>, <suf> and <mid>."""
    copy = tmp_path_factory.mktemp("fim") / "smol-fim.gguf"
    tokens = [arg for kind, token in (("fim_pre", "8"), ("fim_suf", "9"), ("fim_mid", "10"))
              for arg in ("--special-token-by-id", kind, token)]  # fmt: skip
    rewrite = Path(sys.executable).with_name("gguf-new-metadata")  # the gguf package's own tool
    subprocess.run([str(rewrite), default_model_path(), str(copy), *tokens, "--force"], check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    return copy


def test_suffix_fills_in_the_middle_on_a_model_with_its_tokens(fim_model: Path) -> None:
    prefix, suffix = "def add(a, b):\n    return", "\n\nprint(add(1, 2))\n"
    models = [{"id": "fim", "path": str(fim_model), "workers": 1, "n_ctx": 512}]
    with serving_models(models, answers=3) as server, ollama.Client(host=server.url) as client:
        filled = client.generate(model="fim", prompt=prefix, suffix=suffix, options=GREEDY)
        assert filled.done and filled.response and filled.prompt_eval_count > 3
        # The same tokens written out by hand: <pre>prefix<suf>suffix<mid>, the same answer.
        by_hand = f"<issue_start>{prefix}<issue_comment>{suffix}<issue_closed>"
        raw = client.generate(model="fim", prompt=by_hand, raw=True, options=GREEDY)
        assert raw.response == filled.response
        streamed = list(client.generate(model="fim", prompt=prefix, suffix=suffix, options=GREEDY,
                                        stream=True))  # fmt: skip
        assert "".join(part.response for part in streamed) == filled.response


def test_embeddings_as_ollama_gives_them(client: ollama.Client, ollama_server: Server) -> None:
    both = client.embed(model=EMBED, input=["the cat sat", "a dog ran"])
    vectors = np.array(both.embeddings)
    assert vectors.shape[0] == 2 and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-4)
    assert both.prompt_eval_count > 0
    one = client.embeddings(model=EMBED, prompt="the cat sat")
    assert np.allclose(one.embedding, vectors[0], atol=1e-4)
    long = "word " * 400  # past the model's 256-token context
    assert len(client.embed(model=EMBED, input=long).embeddings) == 1  # cut to the context, as Ollama does
    with pytest.raises(ollama.ResponseError) as refused:
        client.embed(model=EMBED, input=long, truncate=False)
    assert refused.value.status_code == 400 and "context" in refused.value.error


def test_list_show_ps_and_version(client: ollama.Client, ollama_server: Server) -> None:
    assert [model.model for model in client.list().models] == [CHAT, EMBED, THINKER]
    shown = client.show(CHAT)
    assert shown.details.family == "llama" and shown.details.quantization_level == "Q4_1"
    assert shown.details.parameter_size == "135M" and shown.details.format == "gguf"
    assert "<|im_start|>" in shown.template and "completion" in shown.capabilities
    # The context it is served with (clients size num_ctx from it), and the file's own beside it.
    assert shown.modelinfo["llama.context_length"] == 1024
    assert shown.modelinfo["llama.context_length_trained"] == 8192
    assert client.show(f"{CHAT}:latest").details.family == "llama"  # the tag Ollama's clients add
    loaded = {model.model: model for model in client.ps().models}
    assert set(loaded) == {CHAT, EMBED, THINKER} and loaded[CHAT].context_length == 1024
    assert httpx.get(ollama_server.url + "/api/version").json()["version"]
    # Continue asks by Ollama's older `name` and reads num_ctx from `parameters`.
    by_name = httpx.post(ollama_server.url + "/api/show", json={"name": CHAT}, timeout=30)
    assert by_name.status_code == 200 and by_name.json()["parameters"] == "num_ctx 1024"


def test_the_stream_is_ndjson_one_object_a_line_and_the_last_says_done(ollama_server: Server) -> None:
    body = {"model": CHAT, "messages": ask("Say hi."), "options": GREEDY}
    started = time.monotonic()
    with httpx.stream("POST", ollama_server.url + "/api/chat", json=body, timeout=60) as answer:
        assert answer.headers["content-type"] == "application/x-ndjson"
        raw = answer.read()
    wall_ns = (time.monotonic() - started) * 1e9
    lines = raw.split(b"\n")
    assert lines[-1] == b"" and all(lines[:-1])  # every object ends its line; no blank lines
    objects = [json.loads(line) for line in lines[:-1]]
    assert [o["done"] for o in objects] == [False] * (len(objects) - 1) + [True]
    last = objects[-1]
    assert 0 < last["prompt_eval_duration"] <= last["total_duration"] <= wall_ns
    assert 0 < last["eval_duration"] <= last["total_duration"] and 0 < last["eval_count"] <= 16


def test_a_client_hanging_up_mid_stream_frees_its_sequence(ollama_server: Server) -> None:
    body = {"model": CHAT, "prompt": "Count to a thousand.", "options": {"num_predict": 900}}
    sock = open_request(ollama_server.port, "POST", "/api/generate", body)
    with sock, sock.makefile("rb") as reader:
        assert read_head(reader)[0] == 200
        first = read_chunk(reader)
        assert first is not None and json.loads(first.split(b"\n")[0])["done"] is False
    wait_for_log(ollama_server, "request cancelled by its client")


@pytest.mark.parametrize(
    ("path", "body", "status", "says"),
    [
        ("/api/chat", {"model": "nope", "messages": []}, 404, "does not exist"),
        ("/api/chat", {"model": CHAT, "messages": "hi"}, 400, "messages"),
        ("/api/chat", {"model": CHAT, "messages": [], "options": {"temperature": "hot"}}, 400, "temperature"),
        ("/api/chat", {"model": CHAT, "messages": ask("x"), "options": {"num_ctx": 99999}}, 400, "num_ctx"),
        (
            "/api/chat",
            {"model": CHAT, "messages": [{"role": "user", "content": "x", "images": [PNG]}]},
            400,
            "reads text only",
        ),
        ("/api/chat", {"model": CHAT, "messages": [{"role": "user", "images": ["@@"]}]}, 400, "base64"),
        ("/api/generate", {"model": CHAT, "prompt": "x", "images": [PNG], "suffix": "y"}, 400, "suffix"),
        ("/api/generate", {"model": CHAT, "prompt": "x", "images": ["aGk="]}, 400, "not an image"),
        ("/api/generate", {"model": CHAT, "prompt": "x", "template": "{{ .Prompt }}"}, 400, "template"),
        ("/api/generate", {"model": CHAT, "prompt": "x", "suffix": "y"}, 400, "fill-in-the-middle"),
        ("/api/generate", {"model": CHAT, "prompt": "x", "context": [1, 2]}, 400, "context"),
        ("/api/generate", {"model": CHAT, "prompt": "x", "keep_alive": "soon"}, 400, "keep_alive"),
        ("/api/generate", {"model": EMBED, "prompt": "x"}, 400, "embedding model"),
        ("/api/embed", {"model": CHAT, "input": "x"}, 400, "embeddings"),
        ("/api/pull", {"model": "llama3"}, 501, "configuration"),
    ],
)
def test_errors_are_ollamas_shape_with_the_right_status(
    ollama_server: Server, path: str, body: dict, status: int, says: str
) -> None:
    answer = httpx.post(ollama_server.url + path, json=body, timeout=60)
    assert answer.status_code == status, answer.text
    assert list(answer.json()) == ["error"] and says in answer.json()["error"]


def test_the_root_says_ollama_is_running_and_browsers_get_the_chat_page(ollama_server: Server) -> None:
    plain = httpx.get(ollama_server.url + "/", headers={"Accept": "application/json"})
    assert (plain.status_code, plain.text) == (200, "Ollama is running")
    assert httpx.head(ollama_server.url + "/", headers={"Accept": "application/json"}).status_code == 200
    page = httpx.get(ollama_server.url + "/", headers={"Accept": "text/html"})
    assert page.status_code == 200 and "<html" in page.text.lower()


def test_the_keys_guard_ollamas_routes_but_its_version(start_server: Callable[..., Server]) -> None:
    server = start_server(LLM_API_KEYS="ollama-key", LLM_WORKERS="1")
    refused = httpx.get(server.url + "/api/tags")
    assert refused.status_code == 401 and list(refused.json()) == ["error"]  # Ollama's shape
    assert httpx.post(server.url + "/api/chat", json={"model": "x", "messages": []}).status_code == 401
    assert httpx.get(server.url + "/api/version").status_code == 200  # clients probe it first
    with ollama.Client(host=server.url, headers={"Authorization": "Bearer ollama-key"}) as keyed:
        assert keyed.list().models
        answer = keyed.generate(model=keyed.list().models[0].model, prompt="Hi", options={"num_predict": 4})
        assert answer.done and answer.eval_count == 4


def test_an_empty_request_loads_the_model_and_keep_alive_0_unloads_it() -> None:
    models = [
        {"id": CHAT, "path": default_model_path(), "workers": 1, "n_ctx": 512},
        {"id": "later", "path": default_model_path(), "load": "on_demand", "n_ctx": 512},
        {"id": "vectors", "path": default_model_path(), "load": "on_demand", "n_ctx": 256}
        | {"embedding": True, "pooling": "mean"},
    ]
    with serving_models(models, answers=6) as server, ollama.Client(host=server.url) as client:
        loaded = client.generate(model="later", prompt="")  # Ollama's way to load a model
        assert (loaded.done, loaded.done_reason, loaded.response) == (True, "load", "")
        assert "later" in {model.model for model in client.ps().models}
        # Greedy, and asked for more than four tokens: a sampled answer may end before its fourth.
        counting = ask("Count from one to twenty.")
        answer = client.chat(
            model="later", messages=counting, options={**GREEDY, "num_predict": 4}, keep_alive="1s"
        )
        assert answer.done and answer.eval_count == 4
        # keep_alive: 1s: unloaded a second after it went idle (its entry has no ttl of its own).
        wait_until(lambda: "later" not in {m.model for m in client.ps().models}, 30, "the keep_alive unload")
        cold = client.chat(model="later", messages=ask("Hi."), options={"num_predict": 2}, keep_alive=-1)
        # The wait for its load is load_duration, within total_duration; a warm model's is near 0.
        assert cold.load_duration > answer.load_duration and cold.load_duration > 0
        parts = cold.load_duration + cold.prompt_eval_duration + cold.eval_duration
        assert abs(cold.total_duration - parts) <= 3  # ns of rounding
        for told in ("nan", "1e308", "-5", "soon"):  # the peers' own header, sent by a client: no effect
            body = {"model": "later", "messages": ask("Hi."), "stream": False, "options": {"num_predict": 1}}
            header = {"X-LLM-Load-Seconds": told}
            sent = httpx.post(server.url + "/api/chat", json=body, headers=header, timeout=60)
            assert sent.status_code == 200 and 0 <= sent.json()["load_duration"] < 60 * 1e9, sent.text
        unloaded = client.chat(model="later", messages=[], keep_alive=0)  # and Ollama's way to unload
        assert (unloaded.done, unloaded.done_reason) == (True, "unload")
        assert "later" not in {model.model for model in client.ps().models}
        pinned = client.generate(model=CHAT, prompt="", keep_alive=0)  # a start-up model stays
        assert pinned.done_reason == "unload" and CHAT in {model.model for model in client.ps().models}
        # /api/embed keeps its model as long as it says to (no ttl of its own: else held until needed).
        assert client.embed(model="vectors:latest", input="the cat sat", keep_alive="1s").embeddings
        running = lambda: {m.model for m in client.ps().models}  # noqa: E731
        wait_until(lambda: "vectors" not in running(), 30, "the embed model's unload")


def test_langchains_chat_ollama_invokes_streams_and_binds_tools(ollama_server: Server) -> None:
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langchain_ollama import ChatOllama

    chat = ChatOllama(base_url=ollama_server.url, model=CHAT, temperature=0, seed=7, num_predict=16)
    try:
        whole = chat.invoke("Name a colour.")
        assert isinstance(whole, AIMessage) and whole.content
        assert whole.usage_metadata and whole.usage_metadata["output_tokens"] <= 16
        streamed = "".join(str(chunk.content) for chunk in chat.stream("Name a colour."))
        assert streamed == whole.content

        @tool
        def get_weather(city: str) -> str:
            """The weather in a city."""
            return "Sunny"

        answer = chat.bind_tools([get_weather]).invoke("What is the weather in Paris? Use the tool.")
        assert isinstance(answer, AIMessage) and (answer.content or answer.tool_calls)
        for call in answer.tool_calls:  # whatever the small model chose, a call comes back parsed
            assert call["name"] == "get_weather" and isinstance(call["args"], dict)

    finally:
        chat._client.close()  # LangChain never closes the Ollama client it makes (its socket would leak)


def test_logprobs_whole_and_streamed_as_ollama_and_langchain_read_them(
    ollama_server: Server, client: ollama.Client
) -> None:
    # Ollama's logprobs (0.12.11 on): each token's log-probability and the likeliest at its place,
    # the same tokens chat completions score for the same conversation.
    ask = [{"role": "user", "content": "Name a colour."}]
    options = {"temperature": 0, "num_predict": 8}
    whole = client.chat(model=CHAT, messages=ask, options=options, logprobs=True, top_logprobs=2)
    assert whole.logprobs and "".join(e.token for e in whole.logprobs) == whole.message.content
    assert all(e.top_logprobs is not None and len(e.top_logprobs) == 2 for e in whole.logprobs)
    body = {"model": CHAT, "messages": ask, "max_tokens": 8, "temperature": 0, "logprobs": True}
    scored = httpx.post(ollama_server.url + "/v1/chat/completions", json=body, timeout=60).json()
    expected = [(e["token"], round(e["logprob"], 4)) for e in scored["choices"][0]["logprobs"]["content"]]
    assert [(e.token, round(e.logprob, 4)) for e in whole.logprobs] == expected
    streamed = client.chat(model=CHAT, messages=ask, options=options, logprobs=True, stream=True)
    assert [(e.token, round(e.logprob, 4)) for part in streamed for e in part.logprobs or []] == expected
    generated = client.generate(model=CHAT, prompt="The sky is", options=options, logprobs=True, raw=True)
    assert generated.logprobs and "".join(e.token for e in generated.logprobs) == generated.response
    assert client.chat(model=CHAT, messages=ask, options=options).logprobs is None  # not asked for
    from langchain_ollama import ChatOllama

    chat = ChatOllama(base_url=ollama_server.url, model=CHAT, temperature=0, num_predict=8, logprobs=True)
    try:
        answer = chat.invoke("Name a colour.")
        assert [
            (e["token"], round(e["logprob"], 4)) for e in answer.response_metadata["logprobs"]
        ] == expected
    finally:
        chat._client.close()


def test_llamaindex_chats_streams_calls_tools_thinks_and_embeds(ollama_server: Server) -> None:
    """LlamaIndex's `Ollama` and `OllamaEmbedding` with their defaults (the context window read
    from /api/show and sent as num_ctx with every request), in LlamaIndex's own venv."""
    ran = subprocess.run(
        [str(LLAMAINDEX), str(Path(__file__).parents[2] / "llamaindex" / "ollama_client.py"),
         ollama_server.url, CHAT, EMBED, THINKER],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    report = json.loads(ran.stdout.strip().splitlines()[-1])
    chats = report["chats"]
    assert chats["context_window"] == 1024 and chats["whole"]
    assert chats["usage"]["completion_tokens"] <= 16 and chats["streamed_pieces"] > 2
    # Greedy with a seed: every way LlamaIndex asks gives the same answer.
    assert {chats[key] for key in ("streamed", "async_whole", "async_streamed", "complete",
                                   "stream_complete")} == {chats["whole"]}  # fmt: skip
    person = report["structured"]
    assert isinstance(person["name"], str) and isinstance(person["age"], int)
    tools = report["tools"]
    assert (tools["name"], tools["calls"], tools["text_of_call"]) == ("get_weather", 1, "")
    assert isinstance(tools["kwargs"]["city"], str)
    # The call and its result went back as LlamaIndex writes them, and were answered.
    assert tools["answer"] or tools["answer_calls"]
    thinking = report["thinking"]
    assert thinking["thinking"] and thinking["text"] and thinking["thinking_deltas"] > 0
    assert thinking["streamed_thinking"] == thinking["thinking"]
    assert thinking["streamed_text"] == thinking["text"]
    vectors = report["embeddings"]
    assert len(vectors["one"]) == 576 and np.isclose(np.linalg.norm(vectors["one"]), 1, atol=1e-4)
    assert np.allclose(vectors["batch"][0], vectors["one"], atol=1e-4)
    assert np.allclose(vectors["query"], vectors["one"], atol=1e-4)
    assert not np.allclose(vectors["batch"][1], vectors["one"], atol=1e-2)
