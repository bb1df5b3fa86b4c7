"""The operator's MCP servers (LLM_MCP_SERVERS) as llama-server's GET /tools and POST /tools list and
call them, and the chat page using them in a real Chromium: choosing a server, approving a call,
seeing each call and its output in the conversation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from harness import mcp_server as mcp_servers
from harness.servers import Server, Service
from tests.support.chat_page import ask, open_chat
from tests.support.prometheus import scrape, value
from tests.support.waits import wait_for_log

# An answer here lists tools and calls them too: a loaded machine takes longer than expect's 5 s.
ANSWER = 60_000


@pytest.fixture(scope="module")
def tools_server(mcp_server: Service) -> Iterator[Server]:
    """Three configured servers: one over HTTP, one over stdio, and one that is not there."""
    configured = {
        "calc": {"url": mcp_server.url + "/mcp"},
        "local": {"command": mcp_servers.STDIO_COMMAND},
        "gone": {"url": "http://127.0.0.1:1/mcp"},
    }
    started = Server(
        LLM_WORKERS="1", LLM_MCP_SERVERS=json.dumps(configured), LLM_MCP_TIMEOUT="20"
    ).wait_ready()
    yield started
    started.stop(wait=False)


def test_get_tools_lists_each_servers_tools_as_llama_server_does(tools_server: Server) -> None:
    answer = httpx.get(tools_server.url + "/tools", timeout=60)
    assert answer.status_code == 200
    listed = {entry["tool"]: entry for entry in answer.json()}
    names = {f"{server}_{tool}" for server in ("calc", "local") for tool in ("add", "fail", "hang", "big")}
    assert names <= set(listed), sorted(listed)
    assert not any(name.startswith("gone_") for name in listed)  # it cannot list: left out, said in the log
    wait_for_log(tools_server, "MCP server gone cannot list its tools")

    # Listed again within 30 s (the chat page asks at every view): the worker's listing, not the server's.
    def listings() -> float:
        return value(scrape(tools_server), "llm_mcp_listings_total", server="calc", outcome="completed")

    before = listings()
    assert before >= 1 and httpx.get(tools_server.url + "/tools", timeout=60).json() == answer.json()
    assert listings() == before
    add = listed["calc_add"]
    assert add["type"] == "mcp" and add["server"] == "calc" and add["permissions"] == {"write": False}
    function = add["definition"]["function"]
    assert add["definition"]["type"] == "function" and function["name"] == "calc_add"
    assert function["description"] == "Add two integers." and set(function["parameters"]["properties"]) == {
        "a",
        "b",
    }


def test_post_tools_calls_one_and_says_what_went_wrong(tools_server: Server) -> None:
    def call(body: Any) -> httpx.Response:
        return httpx.post(tools_server.url + "/tools", json=body, timeout=60)

    for name in ("calc_add", "local_add"):  # over HTTP and over stdio
        done = call({"tool": name, "params": {"a": 2, "b": 3}})
        assert done.status_code == 200 and done.json() == {"plain_text_response": "5"}, done.text
    failed = call({"tool": "calc_fail", "params": {"code": 7}})
    assert failed.status_code == 200 and failed.json() == {"error": "Error executing tool fail"}, failed.text
    unknown = call({"tool": "calc_nope"})
    assert unknown.status_code == 404 and unknown.json()["error"]["message"] == 'unknown tool "calc_nope"'
    assert call({"tool": "nobody_add"}).status_code == 404
    streamed = call({"tool": "calc_add", "params": {"a": 1, "b": 1}, "stream": True})
    assert streamed.status_code == 400 and "stream" in streamed.json()["error"]["message"]
    bad: Any
    for bad in ({"params": {}}, {"tool": "calc_add", "params": [1]}, [1]):
        refused = call(bad)
        assert refused.status_code == 400 and refused.json()["error"]["type"] == "invalid_request_error"


def test_a_server_that_configures_no_mcp_servers_answers_403(server: Server) -> None:
    for method in ("GET", "POST"):
        answer = httpx.request(method, server.url + "/tools", json={"tool": "x_y"}, timeout=10)
        assert answer.status_code == 403 and "LLM_MCP_SERVERS" in answer.json()["error"]["message"]


def forcing_the_calculator(page: Any) -> list[dict[str, Any]]:
    """Send the page's Responses requests with the first step forced to call calc's add (so that
    SmolLM2 calls it) and one call at most; the bodies sent, as the page made them."""
    sent: list[dict[str, Any]] = []

    def route(handled: Any) -> None:
        body = json.loads(handled.request.post_data)
        sent.append(body)
        forced: dict[str, Any] = {"max_tool_calls": 1}
        if body["input"][-1].get("role") == "user":
            forced["tool_choice"] = {"type": "mcp", "server_label": "calc", "name": "add"}
        handled.continue_(post_data=json.dumps({**body, **forced}))

    page.route("**/v1/responses", route)
    return sent


def choose(page: Any, server: str) -> None:
    expect(page.locator("#tools-field")).to_be_visible(timeout=ANSWER)
    page.locator(f"#mcp-servers input[value='{server}']").check()


@pytest.mark.external
def test_the_chat_page_asks_before_a_call_then_shows_it_and_its_output(
    tools_server: Server, page: Any
) -> None:
    sent = forcing_the_calculator(page)
    open_chat(page, tools_server, max_tokens="60")
    choose(page, "calc")
    servers = page.locator("#mcp-servers label").all_inner_texts()
    assert [text.split()[0] for text in servers] == ["calc", "local"], servers  # not the one that cannot list
    ask(page, "What is 2 plus 3?")
    first = page.locator(".message.assistant").nth(0)  # ask's .last moves on to later answers
    approval = first.locator(".tool.approval")
    expect(approval).to_contain_text("calc · add waits for your approval", timeout=ANSWER)
    arguments = json.loads(approval.locator("pre").inner_text())
    expect(first).to_have_attribute("data-state", "done", timeout=ANSWER)
    assert sent[0]["store"] is False and sent[0]["tools"] == [
        {"type": "mcp", "server_label": "calc", "require_approval": "always"}
    ]
    approval.get_by_role("button", name="Approve").click()
    expect(approval.locator(".decision")).to_have_text("Approved")
    second = page.locator(".message.assistant").nth(1)
    expect(second).to_have_attribute("data-state", "done", timeout=ANSWER)
    call = second.locator(".tool.call")
    expect(call).to_have_attribute("data-state", "done", timeout=ANSWER)
    expect(call.locator("summary")).to_have_text("Called calc · add")
    assert call.locator("pre").nth(1).inner_text() == str(arguments["a"] + arguments["b"])
    assert second.locator(".words").inner_text().strip()  # the model went on in words
    answered = sent[1]["input"][-1]
    assert answered["type"] == "mcp_approval_response" and answered["approve"] is True
    # Without the tools the conversation goes on over chat completions, the call's answer in words.
    chats: list[dict[str, Any]] = []

    def recorded(handled: Any) -> None:
        chats.append(json.loads(handled.request.post_data))
        handled.continue_()

    page.route("**/v1/chat/completions", recorded)
    page.locator("#mcp-servers input[value='calc']").uncheck()
    expect(ask(page, "Thanks.")).to_have_attribute("data-state", "done", timeout=ANSWER)
    assert [m["role"] for m in chats[0]["messages"]] == ["user", "assistant", "user"]
    assert chats[0]["messages"][1]["content"] == second.locator(".words").inner_text().strip()


@pytest.mark.external
def test_a_denied_call_is_not_made_and_calls_run_unasked_when_the_user_says_so(
    tools_server: Server, page: Any
) -> None:
    sent = forcing_the_calculator(page)
    open_chat(page, tools_server, max_tokens="40")
    choose(page, "calc")
    ask(page, "What is 2 plus 3?")
    first = page.locator(".message.assistant").nth(0)
    first.locator(".tool.approval").get_by_role("button", name="Deny").click()
    expect(first.locator(".decision")).to_have_text("Denied")
    second = page.locator(".message.assistant").nth(1)
    expect(second).to_have_attribute("data-state", "done", timeout=ANSWER)
    assert second.locator(".tool.call").count() == 0 and sent[1]["input"][-1]["approve"] is False
    page.locator("#mcp-approve").uncheck()
    ask(page, "What is 4 plus 4?")
    third = page.locator(".message.assistant").nth(2)
    expect(third).to_have_attribute("data-state", "done", timeout=ANSWER)
    assert third.locator(".tool.approval").count() == 0
    call = third.locator(".tool.call")
    expect(call).to_have_attribute("data-state", "done", timeout=ANSWER)
    arguments = json.loads(call.locator("pre").first.inner_text())
    assert call.locator("pre").nth(1).inner_text() == str(arguments["a"] + arguments["b"])
    assert sent[2]["tools"][0]["require_approval"] == "never"
