"""The Batch API through the openai SDK: files in, results out, bad lines answered, keys apart."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest

from app.settings.values import default_model_path
from harness.servers import Server, serving_models
from tests.integration.conftest import store_sdk as sdk
from tests.support.batches import finished, jsonl, results

CHAT = "/v1/chat/completions"


def chat_line(custom_id: str, text: str = "Say hi.", **body: object) -> dict[str, object]:
    return {"custom_id": custom_id, "method": "POST", "url": CHAT,
            "body": {"messages": [{"role": "user", "content": text}], "max_tokens": 6, **body}}  # fmt: skip


def test_every_line_is_answered_once_good_and_bad(store_server: Server) -> None:
    client = sdk(store_server)
    good = [chat_line(f"good-{n}", f"Count to {n}.") for n in range(3)]
    rejected = chat_line("rejected", max_tokens=-1)  # our API's 400, in its own shape
    unknown_model = chat_line("unknown-model", model="no-such-model")
    wrong_url = {**chat_line("wrong-url"), "url": "/v1/completions"}
    upload = (
        jsonl([*good, rejected, unknown_model, wrong_url]) + b"{not json\n\n" + jsonl([chat_line("good-0")])
    )
    batch_file = client.files.create(file=("requests.jsonl", upload), purpose="batch")
    batch = client.batches.create(input_file_id=batch_file.id, endpoint=CHAT, completion_window="24h",
                                  metadata={"run": "one"})  # fmt: skip
    assert batch.status == "validating" and batch.input_file_id == batch_file.id
    assert batch.metadata == {"run": "one"} and batch.expires_at == batch.created_at + 24 * 3600

    done = finished(client, batch.id)
    assert done.status == "completed", done
    assert done.request_counts is not None
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (8, 3, 5)
    assert done.completed_at and done.in_progress_at and done.finalizing_at
    assert done.model and done.usage is not None

    output = results(client, done.output_file_id)
    assert [line["custom_id"] for line in output] == ["good-0", "good-1", "good-2"]  # in the file's order
    answered = [line["response"]["body"]["usage"] for line in output]
    assert done.usage.input_tokens == sum(used["prompt_tokens"] for used in answered)
    assert done.usage.output_tokens == sum(used["completion_tokens"] for used in answered)
    assert done.usage.total_tokens == done.usage.input_tokens + done.usage.output_tokens
    assert done.model == output[0]["response"]["body"]["model"]
    for line in output:
        assert line["id"].startswith("batch_req_") and line["error"] is None
        response = line["response"]
        assert response["status_code"] == 200 and response["request_id"]
        assert response["body"]["object"] == "chat.completion"
        assert response["body"]["choices"][0]["message"]["content"]
    errors = {line["custom_id"]: line for line in results(client, done.error_file_id)}
    assert errors["rejected"]["response"]["status_code"] == 400
    assert errors["rejected"]["response"]["body"]["error"]["param"] == "max_tokens"
    assert errors["unknown-model"]["response"]["status_code"] == 404
    assert errors["unknown-model"]["response"]["body"]["error"]["code"] == "model_not_found"
    assert errors["wrong-url"]["response"] is None and errors["wrong-url"]["error"]["code"] == "invalid_url"
    assert errors[None]["error"]["code"] == "invalid_json_line" and errors[None]["error"]["line"] == 7
    assert errors["good-0"]["error"]["code"] == "duplicate_custom_id"
    assert len(errors) == 5

    listed = client.files.list(purpose="batch_output")
    assert {done.output_file_id, done.error_file_id} <= {f.id for f in listed}


def test_each_endpoint_runs_as_its_own_api(store_server: Server) -> None:
    client = sdk(store_server)
    lines = {
        "/v1/completions": {"prompt": "Once upon a time", "max_tokens": 5},
        "/v1/responses": {"input": "Say hi.", "max_output_tokens": 16},
    }
    for endpoint, body in lines.items():
        upload = jsonl([{"custom_id": "only", "method": "POST", "url": endpoint, "body": body}])
        batch_file = client.files.create(file=("one.jsonl", upload), purpose="batch")
        batch = client.batches.create(input_file_id=batch_file.id, endpoint=endpoint, completion_window="24h")
        done = finished(client, batch.id)
        assert done.status == "completed" and done.error_file_id is None, done
        (line,) = results(client, done.output_file_id)
        answer = line["response"]["body"]
        assert answer["object"] == ("text_completion" if endpoint == "/v1/completions" else "response")
    stored = client.responses.retrieve(answer["id"])  # a batch's Response is stored as any other
    assert stored.output_text == answer["output"][-1]["content"][0]["text"]


def test_a_batch_belongs_to_its_key(store_server: Server) -> None:
    alice, bob = sdk(store_server), sdk(store_server, "key-bob")
    alices_file = alice.files.create(file=("a.jsonl", jsonl([chat_line("a")])), purpose="batch")
    with pytest.raises(openai.NotFoundError):  # bob cannot run alice's file
        bob.batches.create(input_file_id=alices_file.id, endpoint=CHAT, completion_window="24h")
    batch = alice.batches.create(input_file_id=alices_file.id, endpoint=CHAT, completion_window="24h")
    for ask in (lambda: bob.batches.retrieve(batch.id), lambda: bob.batches.cancel(batch.id)):
        with pytest.raises(openai.NotFoundError):
            ask()
    assert batch.id not in [b.id for b in bob.batches.list()]
    assert batch.id in [b.id for b in alice.batches.list()]
    done = finished(alice, batch.id)
    with pytest.raises(openai.NotFoundError):
        bob.files.content(done.output_file_id or "")
    assert results(alice, done.output_file_id)[0]["custom_id"] == "a"


def test_what_cannot_become_a_batch_is_a_clear_error(store_server: Server) -> None:
    client = sdk(store_server)
    other_purpose = client.files.create(file=("u.jsonl", jsonl([chat_line("x")])), purpose="user_data")
    with pytest.raises(openai.BadRequestError) as wrong_purpose:
        client.batches.create(input_file_id=other_purpose.id, endpoint=CHAT, completion_window="24h")
    assert wrong_purpose.value.body["param"] == "input_file_id"
    with pytest.raises(openai.NotFoundError):
        client.batches.create(input_file_id="file-nope", endpoint=CHAT, completion_window="24h")
    batch_file = client.files.create(file=("b.jsonl", jsonl([chat_line("x")])), purpose="batch")
    for bad, param in (
        ({"endpoint": "/v1/moderations"}, "endpoint"),
        ({"completion_window": "1h"}, "completion_window"),
    ):
        with pytest.raises(openai.BadRequestError) as refused:
            client.batches.create(**{"input_file_id": batch_file.id, "endpoint": CHAT,
                                     "completion_window": "24h", **bad})  # fmt: skip
        assert refused.value.body["param"] == param
    empty = client.files.create(file=("e.jsonl", b"\n\n"), purpose="batch")
    failed = finished(
        client, client.batches.create(input_file_id=empty.id, endpoint=CHAT, completion_window="24h").id
    )
    assert failed.status == "failed" and failed.errors and failed.errors.data
    assert failed.errors.data[0].code == "empty_file"
    with pytest.raises(openai.BadRequestError):  # an ended batch cannot be cancelled
        client.batches.cancel(failed.id)


def test_a_cancelled_batch_keeps_what_it_answered(store_server: Server) -> None:
    client = sdk(store_server, "key-bob")
    lines = [
        chat_line(f"line-{n}", "Write a long story.", max_tokens=200, ignore_eos=True) for n in range(40)
    ]
    batch_file = client.files.create(file=("long.jsonl", jsonl(lines)), purpose="batch")
    batch = client.batches.create(input_file_id=batch_file.id, endpoint=CHAT, completion_window="24h")
    finished(
        client, batch.id, until=lambda b: b.request_counts is not None and b.request_counts.completed >= 1
    )
    cancelling = client.batches.cancel(batch.id)
    assert cancelling.status == "cancelling" and cancelling.cancelling_at
    done = finished(client, batch.id)
    assert done.status == "cancelled" and done.cancelled_at, done
    assert done.request_counts is not None and 1 <= done.request_counts.completed < 40
    assert done.request_counts.total == 40
    answered = [line["custom_id"] for line in results(client, done.output_file_id)]
    assert len(answered) == done.request_counts.completed == len(set(answered))
    assert json.dumps(client.batches.cancel(batch.id).status) == '"cancelled"'  # again: no change


def test_lines_run_on_the_workers_of_their_model() -> None:
    models = [
        {"id": "chat", "path": default_model_path()},
        {"id": "embed", "path": default_model_path(), "embedding": True, "pooling": "mean"},
    ]
    with serving_models(models, answers=4, LLM_WORKERS="2") as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)
        # Without `model`, each line goes to its endpoint's default model, as the API picks it.
        named = [{"model": "embed"} if n else {} for n in range(4)]
        embeddings = [{"custom_id": f"e{n}", "method": "POST", "url": "/v1/embeddings",
                       "body": {"input": f"text {n}", **named[n]}} for n in range(4)]  # fmt: skip
        chats = [chat_line(f"c{n}", **({"model": "chat"} if n else {})) for n in range(4)]
        for endpoint, lines in (("/v1/embeddings", embeddings), (CHAT, chats)):
            batch_file = client.files.create(file=("m.jsonl", jsonl(lines)), purpose="batch")
            batch = client.batches.create(
                input_file_id=batch_file.id, endpoint=endpoint, completion_window="24h"
            )
            done = finished(client, batch.id)
            assert done.status == "completed" and done.error_file_id is None, done
            models_used = {line["response"]["body"]["model"] for line in results(client, done.output_file_id)}
            assert models_used == {"embed" if endpoint == "/v1/embeddings" else "chat"}
        client.close()


def test_a_batch_spends_none_of_its_keys_live_limits(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("carol key-carol rpm=4 tpm=60 concurrency=1\n")
    server = Server(LLM_API_KEYS_FILE=str(keys), LLM_WORKERS="1", LLM_N_THREADS="1").wait_ready()
    try:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="key-carol", max_retries=0)
        lines = [chat_line(f"l{n}", max_tokens=20) for n in range(6)]  # 6 requests, ~300 tokens
        batch_file = client.files.create(file=("l.jsonl", jsonl(lines)), purpose="batch")  # request 1 of 4
        batch = client.batches.create(
            input_file_id=batch_file.id, endpoint=CHAT, completion_window="24h"
        )  # 2
        done = finished(client, batch.id)
        assert done.request_counts is not None and done.request_counts.completed == 6, done
        assert all(line["response"]["status_code"] == 200 for line in results(client, done.output_file_id))
        model = client.models.list().data[0].id
        answer = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=2
        )
        assert answer.choices[0].message.content is not None  # request 3: the key's budget is untouched
        client.close()
    finally:
        log = server.output()
        server.stop(wait=False)
    assert "Traceback" not in log, log
