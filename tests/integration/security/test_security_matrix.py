"""The security matrix on the real server: every route of the app's own url_map, with every key state
and every bad input, answers as it must, in its protocol's shape, with nothing of the server's
insides, and the server is whole afterwards.

Routes come from tests/support/security.py (the app factory's url_map), so a route added later is
covered; each test counts the route x case pairs it tried and the module says the total.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.api.access.draining import starts_work
from harness.servers import Server
from tests.support.rawhttp import RawStream, fetch, open_request
from tests.support.security import LEAKS, Route, clean, error_in_shape, served_routes
from tests.support.waits import wait_until

ALICE, BOB, OPS = "sk-alice-matrix", "sk-bob-matrix", "sk-ops-matrix"
MODEL = "SmolLM2-135M-Instruct.Q4_1"
ROUTES = served_routes()
PAIRS: Counter[str] = Counter()
CHAT = {"role": "user", "content": "Say hi."}
# Internal destinations in their many spellings (the unit matrix has them all, with resolution).
SSRF_URLS = ("http://127.0.0.1:8000/mcp", "http://127.1/", "http://2130706433/", "http://0x7f000001/",
             "http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://0.0.0.0/", "http://169.254.169.254/latest/",
             "http://[fe80::1]/", "http://10.0.0.1/", "http://192.168.1.1/", "http://localhost:8000/",
             "http://images.example.com@127.0.0.1/", "file:///etc/passwd", "gopher://127.0.0.1/")  # fmt: skip
# The routes that generate, in every family: a body past the limit is a 413 on each (others may
# answer before they read a body: Ollama's model management is a 501 whatever it is sent).
GENERATING = ("/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages", "/api/chat",
              "/api/generate", "/completion", "/completions", "/infill")  # fmt: skip

# Bodies no route should take: each is a 4xx in the route's shape, or ignored by a route that reads
# no body; never a 500, a crash or a traceback.
JUNK: dict[str, dict[str, Any]] = {
    "not JSON": {"content": b'{"messages": [', "headers": {"Content-Type": "application/json"}},
    "a JSON array": {"json": []},
    "a string": {"json": "hello"},
    "NUL and lone surrogates": {
        "content": b'{"model": "\\u0000", "prompt": "a\\u0000\\ud800", "input": "\\udfff", "text": "\\ud800",'
        b' "messages": [{"role": "user", "content": "\\ud800\\u0000"}], "query": "\\udc00"}',
        "headers": {"Content-Type": "application/json"},
    },
    "deeply nested JSON": {
        "content": b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "headers": {"Content-Type": "application/json"},
    },
    "duplicate keys": {
        "content": b'{"max_tokens": 1, "max_tokens": -5, "prompt": "x", "messages": [], "model": 7}',
        "headers": {"Content-Type": "application/json"},
    },
    "numbers past their limits": {
        "json": {
            "model": MODEL,
            "prompt": "x",
            "messages": [CHAT],
            "input": "x",
            "max_tokens": 10**30,
            "max_output_tokens": -1,
            "n_predict": -(2**70),
            "num_predict": 1.5,
            "n": -1,
            "temperature": 1e308,
            "top_k": 1.5,
            "top_p": -0.5,
            "seed": -(2**70),
            "n_keep": -32,
            "n_discard": -32,
            "n_probs": 10**9,
            "logprobs": 10**9,
            "top_logprobs": -1,
            "options": {"num_ctx": -5, "num_predict": 10**20},
        }  # fmt: skip
    },
    "a body past LLM_MAX_BODY_BYTES": {
        "content": b'{"prompt": "' + b"a" * (10 << 20) + b'"}',
        "headers": {"Content-Type": "application/json"},
    },
    "a gzip body that inflates past the limit": {
        "content": gzip.compress(b'{"prompt": "' + b" " * (64 << 20) + b'"}'),
        "headers": {"Content-Type": "application/json", "Content-Encoding": "gzip"},
    },
}


@pytest.fixture(scope="module")
def keyed() -> Iterator[Server]:
    server = Server(
        LLM_WORKERS="1",
        LLM_API_KEYS=f"alice:{ALICE},bob:{BOB}",
        LLM_ADMIN_KEYS=f"ops:{OPS}",
        LLM_DEFAULT_MAX_TOKENS="4",
    ).wait_ready()
    yield server
    log = server.output()
    server.stop(wait=False)
    assert "Traceback" not in log and log.count("Booting worker") == 1  # no worker crashed and came back
    print(f"\nsecurity matrix: {sum(PAIRS.values())} route x case pairs ({dict(PAIRS)})")


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_every_route_but_the_public_ones_answers_401_without_a_key_or_with_a_wrong_one(keyed: Server) -> None:
    with httpx.Client(base_url=keyed.url, timeout=30) as client:
        for route in ROUTES:
            if route.public:
                answer = client.request(route.method, route.path())
                assert answer.status_code != 401, route
                clean(route, answer)
                PAIRS["public"] += 1
                continue
            for headers in (
                {},
                auth("sk-wrong"),
                {"x-api-key": "sk-wrong"},
                {"Authorization": f"Basic {ALICE}"},
            ):
                answer = client.request(route.method, route.path(), json={}, headers=headers)
                assert answer.status_code == 401, (route, headers, answer.status_code)
                error_in_shape(route, answer)
                assert ALICE not in answer.text and "sk-wrong" not in answer.text  # a key is never echoed
                PAIRS["401"] += 1


def _operator_only(answer: httpx.Response) -> bool:
    try:
        error = answer.json()["error"]
    except (ValueError, KeyError, TypeError):
        return False
    return isinstance(error, dict) and error.get("code") == "operator_only"


def test_operator_routes_refuse_tenants_keys_and_serve_operators_keys(keyed: Server) -> None:
    # The declaration on each view (@operator_route) decides the column: a route declared later is in it.
    operators = [route for route in ROUTES if route.operator]
    assert {(r.method, r.rule) for r in operators} >= {
        ("POST", "/sleep"), ("POST", "/wake_up"), ("POST", "/models/load"), ("POST", "/models/unload"),
        ("POST", "/lora-adapters"), ("POST", "/v1/load_lora_adapter"), ("POST", "/v1/unload_lora_adapter"),
        ("POST", "/slots/<int:id_slot>"), ("POST", "/tools"),
    }  # fmt: skip
    with httpx.Client(base_url=keyed.url, timeout=120) as client:
        for route in ROUTES:
            if route.public:
                continue
            tenant = client.request(route.method, route.path(), json={}, headers=auth(ALICE))
            clean(route, tenant, "tenant")
            if route.operator:
                assert tenant.status_code == 403 and _operator_only(tenant), (route, tenant.text[:300])
                error_in_shape(route, tenant)
            else:
                assert not _operator_only(tenant), (route, tenant.text[:300])
            operator = client.request(route.method, route.path(), json={}, headers=auth(OPS))
            clean(route, operator, "operator")
            assert operator.status_code != 401 and not _operator_only(operator), (route, operator.text[:300])
            PAIRS["tenant x operator"] += 2
        assert client.post("/wake_up", headers=auth(OPS)).status_code == 200  # (/sleep was among them)
        answer = client.post("/v1/completions", json={"prompt": "Hi", "max_tokens": 2}, headers=auth(ALICE))
        assert answer.status_code == 200, answer.text


def test_bad_bodies_on_every_route_are_clear_errors_and_the_server_stays_whole(keyed: Server) -> None:
    with httpx.Client(base_url=keyed.url, timeout=60, headers=auth(ALICE)) as client:
        for route in ROUTES:
            if route.method == "GET" or route.public:
                continue
            for case, request in JUNK.items():
                answer = client.request(route.method, route.path(), **request)
                clean(route, answer, case)
                if answer.status_code >= 400 and answer.headers.get("content-type", "").startswith(
                    "application/json"
                ):
                    error_in_shape(route, answer)
                if case.startswith(("a body past", "a gzip body")) and route.rule in GENERATING:
                    assert answer.status_code == 413, (route, case, answer.status_code)
                PAIRS["bad body"] += 1
        client.post("/wake_up", headers=auth(OPS))  # (a route may have put the model to sleep)
        answer = client.post("/v1/chat/completions", json={"messages": [CHAT], "max_tokens": 3})
        assert answer.status_code == 200, answer.text


def _create(client: httpx.Client) -> dict[str, str]:
    """One stored object of each kind, Alice's: their ids by the route parameter that names them."""
    response = client.post("/v1/responses", json={"model": MODEL, "input": "hi", "max_output_tokens": 2})
    conversation = client.post(
        "/v1/conversations", json={"items": [{"type": "message", "role": "user", "content": "hi"}]}
    )
    conversation_id = conversation.json()["id"]
    items = client.get(f"/v1/conversations/{conversation_id}/items").json()["data"]
    line = {
        "custom_id": "1",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": MODEL, "messages": [CHAT], "max_tokens": 2},
    }
    file = client.post(
        "/v1/files", data={"purpose": "batch"}, files={"file": ("in.jsonl", json.dumps(line).encode())}
    )
    batch = client.post(
        "/v1/batches",
        json={
            "input_file_id": file.json()["id"],
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
        },
    )
    for made in (response, conversation, file, batch):
        assert made.status_code == 200, made.text
    ids = {"response_id": response.json()["id"], "file_id": file.json()["id"], "batch_id": batch.json()["id"]}
    return {**ids, "conversation_id": conversation_id, "item_id": items[0]["id"]}


def test_another_keys_stored_objects_are_404_on_every_route_that_names_one(keyed: Server) -> None:
    with httpx.Client(base_url=keyed.url, timeout=60, headers=auth(ALICE)) as alice:
        ids = _create(alice)
        named = [r for r in ROUTES if any(f"<{name}>" in r.rule or f":{name}>" in r.rule for name in ids)]
        assert len(named) >= 15
        with httpx.Client(base_url=keyed.url, timeout=60, headers=auth(BOB)) as bob:
            for route in named:
                body = {
                    "metadata": {"k": "v"},
                    "items": [{"type": "message", "role": "user", "content": "x"}],
                }
                answer = bob.request(
                    route.method, route.path(ids), json=body if route.method == "POST" else None
                )
                assert answer.status_code == 404, (route, answer.status_code, answer.text[:200])  # never 403
                error_in_shape(route, answer)
                PAIRS["another key's object"] += 1
            for field, value in (
                ("previous_response_id", ids["response_id"]),
                ("conversation", ids["conversation_id"]),
            ):
                # As an id that never was (OpenAI's 400 for previous_response_id): the same answer.
                answer = bob.post("/v1/responses", json={"model": MODEL, "input": "hi", field: value})
                made_up = {"model": MODEL, "input": "hi", field: value[:-6] + "000000"}
                never = bob.post("/v1/responses", json=made_up)
                assert answer.status_code == never.status_code in (400, 404), (field, answer.text)
                assert answer.json()["error"]["code"] == never.json()["error"]["code"]
                PAIRS["another key's object"] += 1
            listed = bob.get("/v1/files").json()["data"] + bob.get("/v1/batches").json()["data"]
            assert not {ids["file_id"], ids["batch_id"]} & {each["id"] for each in listed}
        for route in named:  # and they are all still there for Alice
            if route.method == "GET":
                assert alice.get(route.path(ids)).status_code == 200, route


def test_while_draining_every_route_that_starts_work_answers_503_with_retry_after() -> None:
    server = Server(LLM_WORKERS="1", LLM_API_KEYS=f"alice:{ALICE}", LLM_GRACEFUL_TIMEOUT="60").wait_ready()
    body = {"prompt": "1, 2, 3,", "max_tokens": 1500, "stream": True}
    headers = {"Content-Type": "application/json", **auth(ALICE)}
    held = RawStream(server.port, body, open_request(server.port, "POST", "/v1/completions", body, headers))
    try:
        held.started()  # a stream under way holds the drain open
        os.kill(server.process.pid, signal.SIGTERM)
        wait_until(lambda: httpx.get(server.url + "/health/ready").status_code == 503, what="draining")
        with httpx.Client(base_url=server.url, timeout=30, headers=auth(ALICE)) as client:
            for route in ROUTES:
                answer = client.request(
                    route.method, route.path(), json=None if route.method == "GET" else {}
                )
                if not starts_work(route.method, route.rule):
                    clean(route, answer)
                    continue
                # (Anthropic's clients know an overload as 529, and retry it as they retry a 503.)
                unavailable = 529 if route.family == "anthropic" else 503
                assert answer.status_code == unavailable, (route, answer.status_code, answer.text[:200])
                assert answer.headers.get("Retry-After") == "1", route
                error_in_shape(route, answer)
                PAIRS["draining"] += 1
    finally:
        held.reader.close()
        held.sock.close()  # the client leaves: its generation ends, and so does the drain
    assert server.process.wait(timeout=90) == 0
    server.stop(wait=False)


@pytest.mark.parametrize(
    ("case", "path", "headers", "status"),
    [
        ("a thousand headers", "/v1/models", {f"X-Many-{n}": "1" for n in range(1000)}, 431),
        ("a 1 MB header", "/v1/models", {"X-Big": "a" * (1 << 20)}, 431),
        ("a request line past 4094 bytes", "/v1/models/" + "m" * 10_000, {}, 414),
    ],
)
def test_gunicorns_limits_on_a_requests_head_answer_in_json(
    keyed: Server, case: str, path: str, headers: dict[str, str], status: int
) -> None:
    answer = fetch(keyed.port, "GET", path, headers={**auth(ALICE), **headers})
    assert answer.status == status, (case, answer.status, answer.body[:200])
    assert answer.header("content-type") == "application/json"
    error = json.loads(answer.body)["error"]
    assert error["type"] == "invalid_request_error" and error["message"], error
    assert not LEAKS.search(answer.body.decode()), answer.body[:300]
    PAIRS["request head limits"] += 1
    assert httpx.get(keyed.url + "/health").status_code == 200


def test_a_client_cannot_make_the_server_connect_inside_its_network(keyed: Server) -> None:
    """The SSRF matrix (tests/unit/api/test_ssrf_matrix.py) through the real server: an MCP server at
    each internal URL, in the Responses API and in Anthropic's mcp_servers, on a server whose
    operator allowed no destination (LLM_MCP_ALLOW unset): a 400 naming the setting, nothing tried."""
    with httpx.Client(base_url=keyed.url, timeout=30, headers=auth(ALICE)) as client:
        for url in SSRF_URLS:
            tool = {"type": "mcp", "server_label": "x", "server_url": url, "require_approval": "never"}
            answer = client.post("/v1/responses", json={"model": MODEL, "input": "hi", "tools": [tool]})
            assert answer.status_code == 400 and "LLM_MCP_ALLOW" in answer.text, (url, answer.text)
            error_in_shape(Route("POST", "/v1/responses", "responses.create_response"), answer)
            servers = [{"type": "url", "name": "x", "url": url}]
            body = {"model": MODEL, "max_tokens": 4, "messages": [CHAT], "mcp_servers": servers}
            answer = client.post(
                "/v1/messages", json=body, headers={"anthropic-beta": "mcp-client-2025-04-04"}
            )
            assert answer.status_code == 400 and "LLM_MCP_ALLOW" in answer.text, (url, answer.text)
            error_in_shape(Route("POST", "/v1/messages", "anthropic.create_message"), answer)
            PAIRS["SSRF"] += 2


def test_no_answer_shows_where_the_server_keeps_its_model(keyed: Server) -> None:
    """/v1/models' root, /props' model_path and Ollama's modelfile name the file, not its place on the
    server (LLM_SHOW_PATHS=1 shows it, as llama-server does)."""
    with httpx.Client(base_url=keyed.url, timeout=30, headers=auth(ALICE)) as client:
        (model,) = client.get("/v1/models").json()["data"]
        shown = [model["root"], client.get("/props").json()["model_path"]]
        shown.append(
            client.post("/api/show", json={"model": MODEL}).json()["modelfile"].split("FROM ")[1].strip()
        )
    assert shown == [f"{MODEL}.gguf"] * 3 or all(
        "/" not in each and each.endswith(".gguf") for each in shown
    ), shown
