"""LoRA adapters: loaded with their model, chosen per request (llama-server's `lora`), global scales set.

The real server and model, with two small random-weight adapters written for it
(harness/tiny_lora.py), driven by the openai SDK and raw HTTP.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from app.settings.values import default_model_path
from harness import llama_server, tiny_lora
from harness.servers import Server, serving_models
from tests.support import tiny_bert
from tests.support.procs import connection_to_each_worker, worker_pids
from tests.support.waits import wait_until

KEY = "key-lora"
AUTH = {"Authorization": f"Bearer {KEY}"}
PROMPT = "Once upon a time"


@pytest.fixture(scope="module")
def adapters() -> tuple[Path, Path]:
    base = default_model_path()  # made once per machine by make test-models
    return tiny_lora.cached(base), tiny_lora.cached(base, seed=1)


@pytest.fixture(scope="module")
def lora_server(adapters: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    loras = [{"id": name, "path": str(path), "scale": 0} for name, path in zip("ab", adapters, strict=True)]
    models = [{"id": "smol", "path": default_model_path(), "workers": 2, "parallel": 4, "loras": loras}]
    slots = str(tmp_path_factory.mktemp("slots"))
    # The reproducible kernels: an adapter's answer is compared with llama-server's, and with
    # itself beside other requests, bit for bit.
    with serving_models(
        models, answers=6, LLM_ADMIN_KEYS=KEY, LLM_BATCH_INVARIANT="1", LLM_SLOT_SAVE_PATH=slots
    ) as server:
        yield server


@pytest.fixture
def sdk(lora_server: Server) -> Iterator[openai.OpenAI]:
    httpx.post(lora_server.url + "/lora-adapters", json=[], headers=AUTH).raise_for_status()  # all at 0
    with openai.OpenAI(base_url=lora_server.url + "/v1", api_key=KEY, max_retries=0) as client:
        yield client


def complete(sdk: openai.OpenAI, lora: list[dict[str, object]] | None = None, tokens: int = 24) -> str:
    extra = {"lora": lora} if lora is not None else {}
    answer = sdk.completions.create(
        model="smol", prompt=PROMPT, max_tokens=tokens, temperature=0, extra_body=extra
    )
    return answer.choices[0].text


def test_scale_zero_is_the_base_model_and_each_adapter_changes_the_answer(sdk: openai.OpenAI) -> None:
    base = complete(sdk)
    assert complete(sdk, [{"id": 0, "scale": 0}]) == base
    assert complete(sdk, [{"id": "a", "scale": 0.0}, {"id": "b", "scale": 0}]) == base
    with_a, with_b = complete(sdk, [{"id": 0, "scale": 1}]), complete(sdk, [{"id": "b", "scale": 1}])
    assert with_a != base and with_b != base and with_a != with_b
    assert complete(sdk, [{"id": "a", "scale": 1}]) == with_a  # by index or by name: the same adapter


def test_requests_with_different_adapters_in_flight_at_once_each_get_their_own(sdk: openai.OpenAI) -> None:
    mixed = [{"id": 0, "scale": 0.5}, {"id": 1, "scale": 0.5}]
    sets = [None, [{"id": 0, "scale": 1}], [{"id": 1, "scale": 1}], mixed]
    alone = [complete(sdk, lora, tokens=48) for lora in sets]
    assert len(set(alone)) == 4
    # All four in flight at once: every stream has sent a first token before any is read further.
    started = threading.Barrier(len(sets))
    together: list[str] = [""] * len(sets)

    def stream(n: int) -> None:
        extra = {"lora": sets[n]} if sets[n] is not None else {}
        chunks = sdk.completions.create(model="smol", prompt=PROMPT, max_tokens=48, temperature=0,
                                        stream=True, extra_body=extra)  # fmt: skip
        pieces = iter(chunks)
        first = next(pieces)
        started.wait(60)
        together[n] = first.choices[0].text + "".join(c.choices[0].text for c in pieces if c.choices)

    threads = [threading.Thread(target=stream, args=(n,)) for n in range(len(sets))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert together == alone


def test_an_adapter_answers_batched_as_it_answers_alone(sdk: openai.OpenAI) -> None:
    """Four prompts under the same adapter and scale, in flight at once, share decode steps; in the
    reproducible mode (this module's) each answer is its lone answer, bit for bit: the adapter's
    float products take the same sgemm path for one row as for many (the wheel's patch)."""
    prompts = ["Once upon a time", "The capital of France is", "def fibonacci(n):", "Dear Sir or Madam,"]
    adapter = [{"id": "a", "scale": 1}]

    def ask(prompt: str) -> str:
        answer = sdk.completions.create(model="smol", prompt=prompt, max_tokens=32, temperature=0,
                                        extra_body={"lora": adapter})  # fmt: skip
        return answer.choices[0].text

    alone = [ask(prompt) for prompt in prompts]
    together: list[str] = [""] * len(prompts)
    threads = [
        threading.Thread(target=lambda n=n: together.__setitem__(n, ask(prompts[n]))) for n in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert together == alone


def test_global_scales_apply_on_every_worker_until_a_request_says_otherwise(
    lora_server: Server, sdk: openai.OpenAI, adapters: tuple[Path, Path]
) -> None:
    url = lora_server.url + "/lora-adapters"
    listed = httpx.get(url, headers=AUTH).json()
    assert [(a["id"], a["name"], a["scale"]) for a in listed] == [(0, "a", 0.0), (1, "b", 0.0)]
    assert listed[0]["path"] == adapters[0].name  # its name: where it is kept is not for clients
    base, with_a = complete(sdk), complete(sdk, [{"id": "a", "scale": 1}])
    done = httpx.post(url, json=[{"id": 0, "scale": 1}], headers=AUTH)
    assert (done.status_code, done.json()) == (200, {"success": True})
    # Both workers took it: fresh connections land on either; each answers with adapter a.
    for _ in range(6):
        assert httpx.get(url, headers={**AUTH, "Connection": "close"}).json()[0]["scale"] == 1.0
        fresh = openai.OpenAI(base_url=lora_server.url + "/v1", api_key=KEY, max_retries=0)
        assert complete(fresh) == with_a
        fresh.close()
    assert complete(sdk, [{"id": "b", "scale": 0}]) == base  # a request's own list: a is off for it
    httpx.post(url, json=[], headers=AUTH).raise_for_status()
    assert complete(sdk) == base


def test_global_scales_hold_on_a_worker_started_after_they_were_set(
    lora_server: Server, sdk: openai.OpenAI
) -> None:
    url = lora_server.url + "/lora-adapters"
    with_a = complete(sdk, [{"id": "a", "scale": 1}])
    httpx.post(url, json=[{"id": 0, "scale": 1}], headers=AUTH).raise_for_status()
    master = lora_server.process.pid
    before = set(worker_pids(master))
    os.kill(min(before), signal.SIGKILL)  # gunicorn starts another, which loads the model afresh
    wait_until(lambda: len(set(worker_pids(master)) - before) == 1, 60, "a new worker")
    lora_server.wait_ready(answers=6)
    held = connection_to_each_worker("127.0.0.1", lora_server.port, master, 2)
    try:
        for connection in held.values():  # the new worker too: the scales set, not LLM_MODELS' 0
            connection.request("GET", "/lora-adapters", headers=AUTH)
            assert [a["scale"] for a in json.loads(connection.getresponse().read())] == [1.0, 0.0]
    finally:
        for connection in held.values():
            connection.close()
    for _ in range(4):
        with openai.OpenAI(base_url=lora_server.url + "/v1", api_key=KEY, max_retries=0) as fresh:
            assert complete(fresh) == with_a


def test_bad_lora_input_is_a_400_naming_it(lora_server: Server, sdk: openai.OpenAI) -> None:
    for lora, param in [
        ([{"id": 7, "scale": 1}], "lora"),
        ([{"id": "c", "scale": 1}], "lora"),
        ([{"id": -1, "scale": 1}], "lora[0].id"),
        ([{"id": 0, "scale": "high"}], "lora[0].scale"),
        ([{"id": 0}], "lora[0].scale"),
        ({"id": 0, "scale": 1}, "lora"),
    ]:
        with pytest.raises(openai.BadRequestError) as refused:
            complete(sdk, lora)
        assert refused.value.status_code == 400 and refused.value.body["param"] == param, lora
    unknown = complete_error(sdk, [{"id": 7, "scale": 1}])
    assert "has no LoRA adapter 7; its adapters: 0 ('a'), 1 ('b')" in unknown
    url = lora_server.url + "/lora-adapters"
    assert httpx.get(url).status_code == 401 and httpx.post(url, json=[]).status_code == 401
    not_a_list = httpx.post(url, json={"id": 0, "scale": 1}, headers=AUTH)
    assert not_a_list.status_code == 400 and "JSON array" in not_a_list.json()["error"]["message"]
    assert httpx.post(url, json=[{"id": 5, "scale": 1}], headers=AUTH).json()["error"]["param"] == "lora"


def complete_error(sdk: openai.OpenAI, lora: list[dict[str, object]]) -> str:
    with pytest.raises(openai.BadRequestError) as refused:
        complete(sdk, lora)
    return refused.value.message


def test_an_adapter_for_another_model_stops_start_up_naming_it(tmp_path: Path) -> None:
    bert = tiny_bert.write(tmp_path / "bert.gguf")
    foreign = tiny_lora.write(tmp_path / "bert-lora.gguf", str(bert))
    models = [{"id": "smol", "path": default_model_path(), "loras": [{"id": "x", "path": str(foreign)}]}]
    server = Server(LLM_MODELS=json.dumps(models), LLM_N_THREADS="1")
    try:
        assert server.process.wait(timeout=120) != 0  # gunicorn halts: the worker can never boot
        assert f"LoRA adapter {foreign}: llama.cpp could not load it" in server.output()
    finally:
        server.stop()


def test_an_adapter_answers_as_llama_servers_with_the_same_adapter_and_scale(
    adapters: tuple[Path, Path], sdk: openai.OpenAI
) -> None:
    reference = llama_server.start(
        default_model_path(),
        threads=1,
        slots=1,
        n_ctx=512,
        extra=("--lora", str(adapters[0])),
        same_kernels=True,
    )
    try:
        for scale in (1.0, 0.5, 0.0):
            body = {"prompt": PROMPT, "max_tokens": 24, "temperature": 0, "cache_prompt": False,
                    "lora": [{"id": 0, "scale": scale}]}  # fmt: skip
            theirs = httpx.post(reference.url + "/v1/completions", json=body, timeout=120).json()
            assert complete(sdk, [{"id": "a", "scale": scale}]) == theirs["choices"][0]["text"], scale
    finally:
        reference.stop()


def lora_info(server: Server) -> dict[str, str]:
    """The labels of vLLM's `vllm:lora_requests_info`, as the gateway's picker reads them."""
    for line in httpx.get(server.url + "/metrics", headers=AUTH, timeout=10).text.splitlines():
        if line.startswith("vllm:lora_requests_info{"):
            labels = line[len("vllm:lora_requests_info{") : line.rindex("}")]
            return dict(
                (key, value.strip('"')) for key, value in (pair.split("=", 1) for pair in labels.split(","))
            )
    raise AssertionError("no vllm:lora_requests_info series")


def test_an_adapter_named_as_the_model_is_the_base_model_with_that_adapter(
    lora_server: Server, sdk: openai.OpenAI
) -> None:
    # vLLM's way: `model` names the adapter. Its answer is llama-server's way's, the adapter at 1.
    named = sdk.completions.create(model="a", prompt=PROMPT, max_tokens=24, temperature=0)
    assert named.model == "a" and named.choices[0].text == complete(sdk, [{"id": "a", "scale": 1}])
    assert named.choices[0].text != complete(sdk)  # not the base model's
    messages = [{"role": "user", "content": PROMPT}]
    chat = sdk.chat.completions.create(model="b", messages=messages, max_tokens=16, temperature=0)
    plain = sdk.chat.completions.create(
        model="smol",
        messages=messages,
        max_tokens=16,
        temperature=0,
        extra_body={"lora": [{"id": 1, "scale": 1}]},
    )
    assert chat.model == "b" and chat.choices[0].message.content == plain.choices[0].message.content
    # Ollama's clients name it the same way.
    ollama = httpx.post(
        lora_server.url + "/api/chat",
        json={
            "model": "b",
            "messages": messages,
            "stream": False,
            "options": {"temperature": 0, "num_predict": 16},
        },
        headers=AUTH,
        timeout=60,
    ).json()
    assert ollama["message"]["content"] == plain.choices[0].message.content
    # Listed as models of their own, their parent the base model (vLLM's shape).
    listed = {m.id: m for m in sdk.models.list().data}
    assert {"smol", "a", "b"} <= set(listed)
    a = listed["a"].model_dump()
    assert (
        a["parent"] == "smol"
        and a["root"].endswith(".gguf")
        and listed["smol"].model_dump()["parent"] is None
    )
    assert sdk.models.retrieve("b").model_dump()["parent"] == "smol"
    # Naming an adapter as the model and sending `lora` too is a contradiction: a 400 naming it.
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.completions.create(
            model="a", prompt=PROMPT, max_tokens=4, extra_body={"lora": [{"id": "b", "scale": 1}]}
        )
    assert refused.value.body["param"] == "lora"


def test_the_adapters_requests_run_with_are_in_vllms_lora_metric(
    lora_server: Server, sdk: openai.OpenAI
) -> None:
    assert lora_info(lora_server) == {
        "running_lora_adapters": "",
        "waiting_lora_adapters": "",
        "max_lora": "2",
    }
    stream = sdk.completions.create(
        model="b", prompt=PROMPT, max_tokens=300, temperature=0, stream=True, extra_body={"ignore_eos": True}
    )
    chunks = iter(stream)
    next(chunks)  # generating now
    assert lora_info(lora_server)["running_lora_adapters"] == "b"
    assert sum(1 for _ in chunks) > 10
    wait_until(
        lambda: lora_info(lora_server)["running_lora_adapters"] == "", 10, "the adapter to be idle again"
    )


def test_a_slot_holding_cells_of_an_adapter_is_not_saved_and_says_why(
    lora_server: Server, sdk: openai.OpenAI
) -> None:
    """A slot file keeps no LoRA scales, so such cells are refused: the requester's 400, not a 500."""
    complete(sdk, [{"id": "a", "scale": 1}], tokens=8)
    listed = httpx.get(lora_server.url + "/slots", headers=AUTH).json()
    held = [slot["id"] for slot in listed if slot["n_prompt_tokens"]]
    saves = [
        httpx.post(
            f"{lora_server.url}/slots/{slot}?action=save", json={"filename": f"s{slot}.bin"}, headers=AUTH
        )
        for slot in held
    ]
    assert {save.status_code for save in saves} <= {200, 400}, [save.text for save in saves]
    refused = [save.json()["error"] for save in saves if save.status_code == 400]
    assert refused, [save.text for save in saves]
    assert all(error["message"].startswith("Unable to save slot: its cells were evaluated with LoRA scales")
               and error["type"] == "invalid_request_error" for error in refused)  # fmt: skip
