"""LoRA adapters loaded and unloaded at run time: vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter.

The real server (two gevent workers) and model; adapter "a" comes from LLM_MODELS, and the
same file loaded at run time under another name must answer exactly as "a" does, on every
worker, after a worker restart too, and never again once unloaded.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from app.settings.values import default_model_path
from harness import tiny_lora
from harness.servers import Server, serving_models
from tests.support import tiny_bert
from tests.support.procs import connection_to_each_worker, worker_pids
from tests.support.waits import wait_until

KEY = "key-lora-runtime"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def lora_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """LLM_LORA_DIRS: the two test adapters, one written for another model, and a file that is no GGUF."""
    folder = tmp_path_factory.mktemp("loras")
    base = default_model_path()
    for seed, name in ((0, "first.gguf"), (1, "second.gguf")):
        shutil.copy(tiny_lora.cached(base, seed=seed), folder / name)
    bert = tiny_bert.write(tmp_path_factory.mktemp("bert") / "bert.gguf")
    tiny_lora.write(folder / "for-bert.gguf", str(bert))
    (folder / "notes.gguf").write_text("not a GGUF file\n")
    return folder


@pytest.fixture(scope="module")
def server(lora_dir: Path) -> Iterator[Server]:
    loras = [{"id": "a", "path": str(lora_dir / "first.gguf"), "scale": 0}]
    models = [{"id": "smol", "path": default_model_path(), "workers": 2, "parallel": 2, "loras": loras}]
    with serving_models(
        models, answers=4, LLM_ADMIN_KEYS=KEY, LLM_LORA_DIRS=str(lora_dir), LLM_ROUTE_BY_CACHE="0"
    ) as started:
        yield started


@pytest.fixture
def sdk(server: Server) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0) as client:
        yield client


def load(server: Server, name: str, path: str, **more: object) -> httpx.Response:
    body = {"lora_name": name, "lora_path": path, **more}
    return httpx.post(server.url + "/v1/load_lora_adapter", json=body, headers=AUTH, timeout=60)


def unload(server: Server, name: str) -> httpx.Response:
    return httpx.post(
        server.url + "/v1/unload_lora_adapter", json={"lora_name": name}, headers=AUTH, timeout=60
    )


def answer(client: openai.OpenAI, model: str, prompt: str, tokens: int = 24) -> str:
    made = client.completions.create(model=model, prompt=prompt, max_tokens=tokens, temperature=0)
    assert made.model == model
    return made.choices[0].text


def each_worker_answers(server: Server, model: str, prompt: str) -> list[str]:
    """`model`'s answer to `prompt` from each worker, on a kept-alive connection to each."""
    held = connection_to_each_worker("127.0.0.1", server.port, server.process.pid, 2)
    texts = []
    try:
        for connection in held.values():
            body = {"model": model, "prompt": prompt, "max_tokens": 24, "temperature": 0}
            connection.request(
                "POST", "/v1/completions", json.dumps(body), {**AUTH, "Content-Type": "application/json"}
            )
            reply = connection.getresponse()
            assert reply.status == 200, reply.read()
            texts.append(json.loads(reply.read())["choices"][0]["text"])
    finally:
        for connection in held.values():
            connection.close()
    return texts


def test_a_loaded_adapter_is_a_model_on_every_worker_until_unloaded(
    server: Server, sdk: openai.OpenAI
) -> None:
    prompt = "The old lighthouse keeper"
    with_a, base = answer(sdk, "a", prompt), answer(sdk, "smol", prompt)
    assert with_a != base
    done = load(server, "runtime-a", "first.gguf")  # relative: in LLM_LORA_DIRS
    assert (done.status_code, done.text) == (200, "Success: LoRA adapter 'runtime-a' added successfully.")
    assert each_worker_answers(server, "runtime-a", prompt) == [with_a, with_a]
    listed = {m.id: m.model_dump() for m in sdk.models.list().data}
    assert listed["runtime-a"]["parent"] == "smol" and listed["runtime-a"]["root"].endswith("first.gguf")
    tags = {m["name"]: m for m in httpx.get(server.url + "/api/tags", headers=AUTH).json()["models"]}
    assert (
        tags["runtime-a"]["details"]["parent_model"] == "smol"
        and tags["a"]["details"]["parent_model"] == "smol"
    )
    assert tags["smol"]["details"]["parent_model"] == "" and tags["runtime-a"]["size"] > tags["smol"]["size"]
    llama_list = httpx.get(server.url + "/lora-adapters", headers=AUTH).json()
    assert [(a["id"], a["name"], a["scale"]) for a in llama_list] == [(0, "a", 0.0), (1, "runtime-a", 0.0)]
    # llama-server's per-request list reaches it by name or index too.
    extra = {"lora": [{"id": "runtime-a", "scale": 1}]}
    same = sdk.completions.create(model="smol", prompt=prompt, max_tokens=24, temperature=0, extra_body=extra)
    assert same.choices[0].text == with_a

    gone = unload(server, "runtime-a")
    assert (gone.status_code, gone.text) == (200, "Success: LoRA adapter 'runtime-a' removed successfully.")
    for _ in range(4):  # fresh connections: either worker
        with openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0) as fresh:
            with pytest.raises(openai.NotFoundError):
                answer(fresh, "runtime-a", prompt)
    assert "runtime-a" not in {m.id for m in sdk.models.list().data}
    assert "runtime-a" not in {
        m["name"] for m in httpx.get(server.url + "/api/tags", headers=AUTH).json()["models"]
    }
    again = unload(server, "runtime-a")
    assert (
        again.status_code == 404
        and again.json()["error"]["message"] == "The lora adapter 'runtime-a' cannot be found."
    )
    assert answer(sdk, "a", prompt) == with_a and answer(sdk, "smol", prompt) == base  # the others unchanged


def test_a_stream_keeps_its_adapter_while_it_is_unloaded(server: Server, sdk: openai.OpenAI) -> None:
    prompt = "In a quiet village by the sea"
    assert load(server, "streamed", "second.gguf").status_code == 200
    whole = answer(sdk, "streamed", prompt, tokens=80)
    stream = sdk.completions.create(
        model="streamed", prompt=prompt, max_tokens=80, temperature=0, stream=True
    )
    chunks = iter(stream)
    text = next(chunks).choices[0].text  # decoding with it now
    assert unload(server, "streamed").status_code == 200
    text += "".join(chunk.choices[0].text for chunk in chunks)
    assert text == whole
    with pytest.raises(openai.NotFoundError):
        answer(sdk, "streamed", prompt)


def test_a_loaded_adapter_holds_on_a_worker_started_after_it_was_loaded(
    server: Server, sdk: openai.OpenAI
) -> None:
    prompt = "The robot opened the door"
    with_a = answer(sdk, "a", prompt)
    assert load(server, "kept", "first.gguf").status_code == 200
    master = server.process.pid
    before = set(worker_pids(master))
    os.kill(min(before), signal.SIGKILL)  # gunicorn starts another, which loads the model afresh
    wait_until(lambda: len(set(worker_pids(master)) - before) == 1, 60, "a new worker")
    server.wait_ready(answers=4)
    assert each_worker_answers(server, "kept", prompt) == [with_a, with_a]
    assert unload(server, "kept").status_code == 200


def test_loads_run_beside_requests_on_both_workers(server: Server, sdk: openai.OpenAI) -> None:
    prompt = "A dragon counted its gold"
    base = answer(sdk, "smol", prompt, tokens=64)
    results: list[str] = []

    def ask() -> None:
        with openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0) as client:
            results.append(answer(client, "smol", prompt, tokens=64))

    askers = [threading.Thread(target=ask) for _ in range(4)]
    for each in askers:
        each.start()
    loaded = [load(server, f"busy-{n}", "second.gguf") for n in range(3)]
    for each in askers:
        each.join(timeout=120)
    assert [r.status_code for r in loaded] == [200, 200, 200] and results == [base] * 4
    assert len({answer(sdk, f"busy-{n}", prompt) for n in range(3)}) == 1
    for n in range(3):
        assert unload(server, f"busy-{n}").status_code == 200


def test_bad_loads_are_clear_errors_naming_the_field(server: Server, lora_dir: Path) -> None:
    outside = lora_dir.parent / "outside.gguf"
    shutil.copy(lora_dir / "first.gguf", outside)
    cases = [
        ({"lora_name": "x", "lora_path": str(outside)}, 403, "lora_path", "outside the directories"),
        ({"lora_name": "x", "lora_path": "../outside.gguf"}, 403, "lora_path", "outside the directories"),
        ({"lora_name": "x", "lora_path": "missing.gguf"}, 400, "lora_path", "is not a file"),
        (
            {"lora_name": "x", "lora_path": "notes.gguf"},
            400,
            "lora_path",
            "could not load it as a LoRA adapter",
        ),
        (
            {"lora_name": "x", "lora_path": "for-bert.gguf"},
            400,
            "lora_path",
            "could not load it as a LoRA adapter",
        ),
        ({"lora_name": "a", "lora_path": "first.gguf"}, 400, "lora_name", "'a' has already been loaded"),
        ({"lora_name": "smol", "lora_path": "first.gguf"}, 400, "lora_name", "names a model"),
        ({"lora_name": "x", "lora_path": "first.gguf", "model": "nope"}, 404, "model", "does not exist"),
        ({"lora_path": "first.gguf"}, 400, "lora_name", "required"),
        ({"lora_name": "x"}, 400, "lora_path", "required"),
    ]
    for body, status, param, words in cases:
        refused = httpx.post(server.url + "/v1/load_lora_adapter", json=body, headers=AUTH, timeout=60)
        error = refused.json()["error"]
        assert (refused.status_code, error["param"]) == (status, param), (body, error)
        assert words in error["message"] and "Traceback" not in refused.text, (body, error)
    assert httpx.post(server.url + "/v1/load_lora_adapter", json={}).status_code == 401
    assert httpx.post(server.url + "/v1/unload_lora_adapter", json={"lora_name": "a"}).status_code == 401
    assert "x" not in {m["id"] for m in httpx.get(server.url + "/v1/models", headers=AUTH).json()["data"]}
    # A failed load leaves no place named: the model still serves, and the name is free.
    assert load(server, "x", "first.gguf").status_code == 200
    assert unload(server, "x").status_code == 200


def test_runtime_loading_is_off_unless_the_operator_names_directories() -> None:
    models = [{"id": "smol", "path": default_model_path()}]
    with serving_models(models, answers=1) as plain:
        refused = httpx.post(
            plain.url + "/v1/load_lora_adapter",
            json={"lora_name": "x", "lora_path": "/etc/passwd"},
            timeout=60,
        )
        assert refused.status_code == 403 and "LLM_LORA_DIRS" in refused.json()["error"]["message"]
    bad = Server(LLM_LORA_DIRS="/no/such/dir", LLM_N_THREADS="1")
    try:
        assert bad.process.wait(timeout=120) != 0
        assert "LLM_LORA_DIRS='/no/such/dir': /no/such/dir is not a directory" in bad.output()
    finally:
        bad.stop()
