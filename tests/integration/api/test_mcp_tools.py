"""The Responses API's mcp tools against a real MCP server (the `mcp` SDK's, over streamable HTTP on
loopback), driven by the openai SDK: listing, calls and the final text, approvals, allowed tools,
refused URLs, and a failing, a hanging and a too-talkative tool. Forced tool choices make SmolLM2's
calls deterministic; its arguments are whatever it writes, so the expected output is computed
from them."""

from __future__ import annotations

import asyncio
import http.server
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from harness import mcp_server as mcp_servers
from harness.servers import Server, Service
from tests.support.clients import openai_client
from tests.support.procs import established_to
from tests.support.prometheus import scrape, value
from tests.support.waits import wait_until

SECRET = "Bearer mcp-secret-7f3a"
MODEL = "SmolLM2-135M-Instruct.Q4_1"


@pytest.fixture(scope="module")
def server(mcp_server: Service) -> Iterator[Server]:
    started = Server(
        LLM_WORKERS="1", LLM_MCP_ALLOW=f"127.0.0.1:{mcp_server.port}", LLM_MCP_TIMEOUT="3",
        LLM_MCP_MAX_OUTPUT_BYTES="100000",
    ).wait_ready()  # fmt: skip
    yield started
    started.stop(wait=False)


def mcp_tool(mcp_server: Service, **fields: Any) -> dict[str, Any]:
    return {
        "type": "mcp",
        "server_label": "calc",
        "server_url": mcp_server.url + "/mcp",
        "headers": {"Authorization": SECRET},
        **fields,
    }


def forced(name: str) -> dict[str, str]:
    return {"type": "mcp", "server_label": "calc", "name": name}


def test_a_call_and_the_final_text(server: Server, client: openai.OpenAI, mcp_server: Service) -> None:
    response = client.responses.create(
        model=MODEL, input="What is 2 plus 3?", tools=[mcp_tool(mcp_server, require_approval="never")],
        tool_choice=forced("add"), max_tool_calls=1, max_output_tokens=40, temperature=0,
    )  # fmt: skip
    kinds = [item.type for item in response.output]
    assert kinds[:2] == ["mcp_list_tools", "mcp_call"] and kinds[-1] == "message", kinds
    listing, call = response.output[0], response.output[1]
    assert {t.name for t in listing.tools} == {"add", "fail", "hang", "big"}
    assert listing.tools[0].input_schema["properties"]
    arguments = json.loads(call.arguments)
    assert call.name == "add" and call.error is None
    assert call.output == str(arguments["a"] + arguments["b"])  # the MCP server's own answer
    assert response.output_text  # the model answered in text after the call
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    # The headers reached the MCP server, and nothing the client can read back holds them.
    assert SECRET in mcp_server.output()
    stored = httpx.get(f"{server.url}/v1/responses/{response.id}").text
    assert "mcp-secret" not in stored and "mcp-secret" not in response.model_dump_json()
    assert response.tools[0].headers is None


def test_an_oauth_authorization_goes_as_a_bearer_token_and_is_kept_nowhere(
    server: Server, client: openai.OpenAI, mcp_server: Service
) -> None:
    """OpenAI's `authorization` (an OAuth access token the client obtained) instead of headers."""
    tool = {**mcp_tool(mcp_server, require_approval="never"), "authorization": "oauth-token-5d1e"}
    del tool["headers"]
    response = client.responses.create(
        model=MODEL, input="What is 2 plus 3?", tools=[tool], tool_choice=forced("add"), max_tool_calls=1,
        max_output_tokens=40, temperature=0,
    )  # fmt: skip
    call = next(i for i in response.output if i.type == "mcp_call")
    assert call.error is None and call.output == str(sum(json.loads(call.arguments).values()))
    assert "authorization: Bearer oauth-token-5d1e" in mcp_server.output()
    stored = httpx.get(f"{server.url}/v1/responses/{response.id}").text
    assert "oauth-token" not in stored + response.model_dump_json() + server.output()


def test_read_only_tools_by_the_servers_annotations(
    server: Server, client: openai.OpenAI, mcp_server: Service
) -> None:
    """OpenAI's filters: only the tools the MCP server marks read-only (readOnlyHint) are listed, and
    those are called without asking."""
    tool = mcp_tool(
        mcp_server, allowed_tools={"read_only": True}, require_approval={"never": {"read_only": True}}
    )
    response = client.responses.create(
        model=MODEL, input="What is 2 plus 3?", tools=[tool], tool_choice=forced("add"), max_tool_calls=1,
        max_output_tokens=40, temperature=0,
    )  # fmt: skip
    listing, call = response.output[0], response.output[1]
    assert [t.name for t in listing.tools] == ["add"] and listing.tools[0].annotations["readOnlyHint"] is True
    assert call.type == "mcp_call" and call.output == str(sum(json.loads(call.arguments).values()))


def test_listings_calls_and_every_steps_tokens_are_counted_in_the_metrics(
    server: Server, client: openai.OpenAI, mcp_server: Service
) -> None:
    """Listings and calls by server (a request's URL: its host) and outcome, with the calls' time; and
    the tokens of every step of the loop, as the Response's usage counts them."""
    where = {"server": "127.0.0.1"}

    def figures() -> tuple[float, ...]:
        samples = scrape(server)
        return (
            value(samples, "llm_mcp_listings_total", **where, outcome="completed"),
            value(samples, "llm_mcp_calls_total", **where, outcome="completed"),
            value(samples, "llm_mcp_calls_total", **where, outcome="failed"),
            value(samples, "llm_mcp_call_seconds_count", **where),
            value(samples, "llm_prompt_tokens_total"),
            value(samples, "llm_completion_tokens_total"),
        )

    before = figures()
    usage = [0, 0]
    for name in ("add", "fail"):
        response = client.responses.create(
            model=MODEL, input="Use the tool.", tools=[mcp_tool(mcp_server, require_approval="never")],
            tool_choice=forced(name), max_tool_calls=1, max_output_tokens=60, temperature=0,
        )  # fmt: skip
        assert [i.type for i in response.output][:2] == ["mcp_list_tools", "mcp_call"]
        usage = [usage[0] + response.usage.input_tokens, usage[1] + response.usage.output_tokens]
    expected = (
        before[0] + 2,
        before[1] + 1,
        before[2] + 1,
        before[3] + 2,
        before[4] + usage[0],
        before[5] + usage[1],
    )
    wait_until(lambda: figures() == expected, 30, f"the metrics counting {expected} from {before}")


def test_a_call_waits_for_approval_then_runs(
    server: Server, client: openai.OpenAI, mcp_server: Service
) -> None:
    tools = [mcp_tool(mcp_server)]  # require_approval: "always" by default, as OpenAI's
    first = client.responses.create(
        model=MODEL, input="Add 4 and 5.", tools=tools, tool_choice=forced("add"), max_output_tokens=40,
        temperature=0,
    )  # fmt: skip
    request = first.output[-1]
    assert [i.type for i in first.output] == ["mcp_list_tools", "mcp_approval_request"]
    assert request.name == "add" and json.loads(request.arguments)
    second = client.responses.create(
        model=MODEL, previous_response_id=first.id, tools=tools, max_tool_calls=1, max_output_tokens=40,
        input=[{"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}],
        temperature=0,
    )  # fmt: skip
    kinds = [i.type for i in second.output]
    assert kinds[0] == "mcp_call" and "mcp_list_tools" not in kinds, kinds  # the listing came from the chain
    arguments = json.loads(second.output[0].arguments)
    assert second.output[0].output == str(arguments["a"] + arguments["b"])
    declined = client.responses.create(
        model=MODEL, previous_response_id=first.id, tools=tools, max_tool_calls=1, max_output_tokens=20,
        input=[{"type": "mcp_approval_response", "approval_request_id": request.id, "approve": False}],
        temperature=0,
    )  # fmt: skip
    assert not any(i.type == "mcp_call" for i in declined.output)
    with pytest.raises(openai.BadRequestError) as elsewhere:  # the approved call's server is not in tools
        client.responses.create(
            model=MODEL, previous_response_id=first.id, tools=[mcp_tool(mcp_server, server_label="other")],
            input=[{"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}],
            max_output_tokens=5,
        )  # fmt: skip
    assert elsewhere.value.body["param"] == "tools" and "'calc'" in elsewhere.value.body["message"]


def test_a_stateless_client_approves_with_its_whole_conversation(
    server: Server, client: openai.OpenAI, mcp_server: Service
) -> None:
    """store: false, every turn sends the conversation so far: the approved call is made once, and
    the answer handed back again in later turns does not make it again."""
    tools = [mcp_tool(mcp_server)]  # every call waits for approval
    asked: dict[str, Any] = dict(model=MODEL, tools=tools, store=False, max_output_tokens=40, temperature=0)
    conversation: list[Any] = [{"role": "user", "content": "Add 4 and 5."}]
    first = client.responses.create(input=conversation, tool_choice=forced("add"), **asked)
    request = first.output[-1]
    assert request.type == "mcp_approval_request"
    conversation += [item.model_dump(exclude_none=True) for item in first.output]
    conversation.append({"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True})
    second = client.responses.create(input=conversation, max_tool_calls=1, **asked)
    call = second.output[0]
    assert call.type == "mcp_call" and call.approval_request_id == request.id
    assert call.output == str(sum(json.loads(call.arguments).values()))
    assert not any(i.type == "mcp_list_tools" for i in second.output)  # listed in the input already
    conversation += [item.model_dump(exclude_none=True) for item in second.output]
    conversation.append({"role": "user", "content": "Thanks. And now?"})
    third = client.responses.create(input=conversation, max_tool_calls=1, **asked)
    # Any call the model makes now waits for approval: an mcp_call here could only be the old one again.
    assert not any(i.type == "mcp_call" for i in third.output), [i.type for i in third.output]


def test_allowed_tools_limit_what_is_listed_and_offered(
    server: Server, client: openai.OpenAI, mcp_server: Service
) -> None:
    response = client.responses.create(
        model=MODEL, input="Add 1 and 1.", max_tool_calls=1, max_output_tokens=40, temperature=0,
        tools=[mcp_tool(mcp_server, allowed_tools=["add"], require_approval="never")], tool_choice="required",
    )  # fmt: skip
    assert [t.name for t in response.output[0].tools] == ["add"]
    assert response.output[1].type == "mcp_call" and response.output[1].name == "add"


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("fail", "fail"),
        ("hang", "no answer within 3 s"),
        ("big", "LLM_MCP_MAX_OUTPUT_BYTES"),
    ],
)
def test_a_failing_hanging_or_huge_tool_is_an_error_in_its_call(
    server: Server, client: openai.OpenAI, mcp_server: Service, name: str, error: str
) -> None:
    response = client.responses.create(
        model=MODEL, input="Use the tool.", tools=[mcp_tool(mcp_server, require_approval="never")],
        tool_choice=forced(name), max_tool_calls=1, max_output_tokens=60, temperature=0,
    )  # fmt: skip
    call = next(i for i in response.output if i.type == "mcp_call")
    assert call.output is None and error in call.error, call.error
    assert response.status != "failed" and response.error is None  # the failure is the call's alone
    assert "mcp-secret" not in server.output()  # nor in the server's log


def test_urls_the_operator_did_not_allow_are_refused(
    server: Server, client: openai.OpenAI, mcp_server: Service
) -> None:
    for url, said in [
        ("http://127.0.0.1:1/mcp", "not among the hosts"),  # another port of an allowed address
        (f"http://localhost:{mcp_server.port}/mcp", "not among the hosts"),  # a name, not the listed IP
        ("ftp://127.0.0.1/mcp", "http(s)"),
    ]:
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(
                model=MODEL, input="hi", tools=[mcp_tool(mcp_server, server_url=url)], max_output_tokens=5
            )
        assert refused.value.body["param"] == "tools[0].server_url" and said in refused.value.body["message"]


def test_a_server_that_allows_none_refuses_every_mcp_tool(mcp_server: Service) -> None:
    plain = Server(LLM_WORKERS="1").wait_ready()
    try:
        with openai_client(plain) as client, pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(
                model=MODEL, input="hi", tools=[mcp_tool(mcp_server)], max_output_tokens=5
            )
        assert "LLM_MCP_ALLOW" in refused.value.body["message"]
    finally:
        plain.stop(wait=False)


def test_a_hanging_mcp_call_holds_up_no_other_request(server: Server, mcp_server: Service) -> None:
    """The MCP exchange waits on the worker's event loop: the same worker answers others meanwhile."""
    calls_before = mcp_server.output().count("hang: called")
    with openai_client(server) as client, ThreadPoolExecutor(1) as pool:
        hanging = pool.submit(
            client.responses.create,
            model=MODEL, input="Use the tool.", tools=[mcp_tool(mcp_server, require_approval="never")],
            tool_choice=forced("hang"), max_tool_calls=1, max_output_tokens=60, temperature=0,
        )  # fmt: skip
        _wait_for(lambda: mcp_server.output().count("hang: called") > calls_before or hanging.done())
        answered = []
        while not hanging.done():
            started = time.monotonic()
            reply = client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=4
            )
            answered.append((time.monotonic() - started, hanging.done(), reply.choices[0].message.content))
        response = hanging.result()
    call = next(i for i in response.output if i.type == "mcp_call")
    assert "no answer within 3 s" in call.error
    assert [done for _, done, _ in answered].count(False) >= 2, answered  # answered while the call hung


def _wait_for(condition: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_the_agents_sdks_hosted_mcp_tool(server: Server, mcp_server: Service) -> None:
    """The openai Agents SDK's HostedMCPTool: the SDK sends the mcp tool, this server runs the loop."""
    import agents
    from agents.model_settings import MCPToolChoice

    agents.set_tracing_disabled(True)  # its traces would go to OpenAI's servers
    client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    tool = agents.HostedMCPTool(tool_config=mcp_tool(mcp_server, require_approval="never"))
    agent = agents.Agent(
        name="calculator",
        instructions="Use the tools to compute.",
        tools=[tool],
        model=agents.OpenAIResponsesModel(model=MODEL, openai_client=client),
        model_settings=agents.ModelSettings(
            tool_choice=MCPToolChoice(server_label="calc", name="add"),
            temperature=0,
            max_tokens=80,
            extra_args={"max_tool_calls": 1},
        ),
    )

    async def run() -> Any:
        async with client:
            return await agents.Runner.run(agent, "What is 2 plus 3?", max_turns=2)

    result = asyncio.run(run())
    kinds = [item.type for item in result.new_items]
    assert "mcp_list_tools_item" in kinds and "tool_call_item" in kinds, kinds
    call = next(i.raw_item for i in result.new_items if i.type == "tool_call_item")
    arguments = json.loads(call.arguments)
    assert call.type == "mcp_call" and call.output == str(arguments["a"] + arguments["b"])
    assert isinstance(result.final_output, str)


def test_the_loop_streams_with_openais_event_names(
    server: Server, client: openai.OpenAI, mcp_server: Service
) -> None:
    with client.responses.stream(
        model=MODEL, input="What is 2 plus 3?", tools=[mcp_tool(mcp_server, require_approval="never")],
        tool_choice=forced("add"), max_tool_calls=1, max_output_tokens=60, temperature=0,
    ) as stream:  # fmt: skip
        events = list(stream)
        final = stream.get_final_response()
    names = [e.type for e in events]
    expected = [
        "response.created",
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
        "response.output_text.delta",
        "response.completed",
    ]
    positions = [names.index(name) for name in expected]
    assert positions == sorted(positions), names  # each once at least, in this order
    assert [e.sequence_number for e in events] == list(range(len(events)))
    kinds = [item.type for item in final.output]
    assert kinds[:2] == ["mcp_list_tools", "mcp_call"] and kinds[-1] == "message", kinds
    call = final.output[1]
    arguments = json.loads(call.arguments)
    assert call.output == str(arguments["a"] + arguments["b"]) and call.id.startswith("mcp_")
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert [item.id for item in done] == [item.id for item in final.output]  # the same items, the same ids
    deltas = "".join(e.delta for e in events if e.type == "response.mcp_call_arguments.delta")
    assert deltas == call.arguments
    # Streamed and whole answers are the same loop: the same items and text at temperature 0.
    whole = client.responses.create(
        model=MODEL, input="What is 2 plus 3?", tools=[mcp_tool(mcp_server, require_approval="never")],
        tool_choice=forced("add"), max_tool_calls=1, max_output_tokens=60, temperature=0,
    )  # fmt: skip
    assert [i.type for i in whole.output] == kinds and whole.output_text == final.output_text
    assert whole.output[1].arguments == call.arguments


class _Redirecting(http.server.BaseHTTPRequestHandler):
    """An allowed address whose endpoint redirects elsewhere (a private address, another origin)."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(307)
        self.send_header("Location", "http://10.1.2.3/mcp")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_a_redirect_elsewhere_and_a_silent_server_are_errors_in_the_listing(mcp_server: Service) -> None:
    redirecting = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Redirecting)
    silent = socket.create_server(("127.0.0.1", 0))  # accepts (the kernel does), never answers
    threading.Thread(target=redirecting.serve_forever, daemon=True).start()
    ports = redirecting.server_address[1], silent.getsockname()[1]
    server = Server(
        LLM_WORKERS="1", LLM_MCP_TIMEOUT="2", LLM_MCP_ALLOW=",".join(f"127.0.0.1:{p}" for p in ports)
    ).wait_ready()
    client = openai_client(server)
    try:
        for port, said in zip(ports, ("10.1.2.3", "no answer within 2 s"), strict=True):
            tool = mcp_tool(mcp_server, server_url=f"http://127.0.0.1:{port}/mcp", require_approval="never")
            response = client.responses.create(
                model=MODEL, input="Hi", tools=[tool], max_output_tokens=8, temperature=0
            )
            listing = response.output[0]
            assert listing.type == "mcp_list_tools" and listing.tools == [] and said in listing.error
            assert response.output[-1].type == "message"  # the model answered without those tools
        assert "mcp-secret" not in server.output()
    finally:
        client.close()
        server.stop(wait=False)
        redirecting.shutdown()
        redirecting.server_close()
        silent.close()


def test_a_background_response_runs_the_loop_and_keeps_its_events(
    server: Server, client: openai.OpenAI, mcp_server: Service
) -> None:
    queued = client.responses.create(
        model=MODEL, input="What is 2 plus 3?", tools=[mcp_tool(mcp_server, require_approval="never")],
        tool_choice=forced("add"), max_tool_calls=1, max_output_tokens=60, temperature=0, background=True,
    )  # fmt: skip
    assert queued.status == "queued"
    _wait_for(lambda: client.responses.retrieve(queued.id).status not in ("queued", "in_progress"), 120)
    done = client.responses.retrieve(queued.id)
    kinds = [item.type for item in done.output]
    assert done.status in ("completed", "incomplete") and kinds[:2] == ["mcp_list_tools", "mcp_call"], kinds
    arguments = json.loads(done.output[1].arguments)
    assert done.output[1].output == str(arguments["a"] + arguments["b"])
    # Its events, kept: read again from the start as the SDK resumes a background stream.
    replay = httpx.get(f"{server.url}/v1/responses/{queued.id}", params={"stream": "true"}, timeout=30).text
    assert "event: response.mcp_call.completed" in replay and "event: response.completed" in replay
    assert "mcp-secret" not in replay


def test_servers_the_operator_configured_are_named_by_label(mcp_server: Service, tmp_path: Path) -> None:
    """LLM_MCP_SERVERS: a URL with its headers from a file, and a command run over stdio; a request
    names them by server_label alone, with no LLM_MCP_ALLOW."""
    headers = tmp_path / "calc-headers.json"
    headers.write_text(json.dumps({"Authorization": "Bearer from-a-file-91c2"}))
    configured = {
        "calc": {"url": mcp_server.url + "/mcp", "headers_file": str(headers)},
        "local": {"command": mcp_servers.STDIO_COMMAND},
    }
    server = Server(
        LLM_WORKERS="1", LLM_MCP_SERVERS=json.dumps(configured), LLM_MCP_TIMEOUT="20"
    ).wait_ready()
    client = openai_client(server)
    try:
        for label in ("calc", "local"):
            response = client.responses.create(
                model=MODEL, input="What is 2 plus 3?", max_tool_calls=1, max_output_tokens=60, temperature=0,
                tools=[{"type": "mcp", "server_label": label, "require_approval": "never"}],
                tool_choice={"type": "mcp", "server_label": label, "name": "add"},
            )  # fmt: skip
            call = next(i for i in response.output if i.type == "mcp_call")
            arguments = json.loads(call.arguments)
            assert call.server_label == label and call.output == str(arguments["a"] + arguments["b"])
        assert "Bearer from-a-file-91c2" in mcp_server.output()  # the file's headers reached it
        with pytest.raises(openai.BadRequestError) as unknown:
            client.responses.create(
                model=MODEL, input="hi", max_output_tokens=5, tools=[{"type": "mcp", "server_label": "nope"}]
            )
        assert (
            unknown.value.body["param"] == "tools[0].server_label"
            and "LLM_MCP_SERVERS" in unknown.value.body["message"]
        )
        assert "from-a-file" not in server.output()
    finally:
        client.close()
        server.stop(wait=False)


def anthropic_servers(mcp_server: Service, **fields: Any) -> list[dict[str, Any]]:
    return [{"type": "url", "name": "calc", "url": mcp_server.url + "/mcp",
             "authorization_token": "mcp-secret-anthropic", **fields}]  # fmt: skip


def test_anthropics_mcp_connector_whole_and_streamed(server: Server, mcp_server: Service) -> None:
    """The anthropic SDK's beta mcp_servers: mcp_tool_use and mcp_tool_result blocks, then the text."""
    with anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0) as client:
        asked: dict[str, Any] = dict(
            model=MODEL, max_tokens=60, betas=["mcp-client-2025-04-04"], extra_body={"temperature": 0},
            messages=[{"role": "user", "content": "What is 2 plus 3?"}],
            mcp_servers=anthropic_servers(mcp_server, tool_configuration={"allowed_tools": ["add"]}),
            tool_choice={"type": "tool", "name": "add"},
        )  # fmt: skip
        message = client.beta.messages.create(**asked)
        kinds = [block.type for block in message.content]
        assert kinds[:2] == ["mcp_tool_use", "mcp_tool_result"] and kinds[-1] == "text", kinds
        used, result = message.content[0], message.content[1]
        assert used.name == "add" and used.server_name == "calc" and result.tool_use_id == used.id
        assert not result.is_error and result.content[0].text == str(used.input["a"] + used.input["b"])
        assert message.stop_reason in ("end_turn", "max_tokens") and message.usage.output_tokens > 0
        assert "mcp-secret-anthropic" in mcp_server.output()  # sent as the bearer token, to it alone
        with client.beta.messages.stream(**asked) as stream:
            events = [event.type for event in stream]
            streamed = stream.get_final_message()
        assert [b.type for b in streamed.content] == kinds
        assert (
            streamed.content[0].input == used.input
            and streamed.content[1].content[0].text == result.content[0].text
        )
        assert events[0] == "message_start" and events[-1] == "message_stop"
        # The conversation goes on with the blocks handed back.
        after = client.beta.messages.create(
            model=MODEL, max_tokens=20, betas=["mcp-client-2025-04-04"], extra_body={"temperature": 0},
            mcp_servers=anthropic_servers(mcp_server),
            messages=[*asked["messages"], {"role": "assistant", "content": message.content},
                      {"role": "user", "content": "Thanks. And 3 plus 4?"}],
        )  # fmt: skip
        assert after.content
    assert "mcp-secret-anthropic" not in server.output()


def test_anthropics_mcp_servers_are_refused_where_not_allowed(server: Server) -> None:
    with anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0) as client:
        with pytest.raises(anthropic.BadRequestError) as refused:
            client.beta.messages.create(
                model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "hi"}],
                mcp_servers=[{"type": "url", "name": "x", "url": "http://10.9.8.7/mcp"}],
            )  # fmt: skip
    assert "LLM_MCP_ALLOW" in refused.value.message


def test_a_stream_keeps_alive_while_a_call_waits_and_a_hang_up_ends_the_call(mcp_server: Service) -> None:
    """Keep-alive comments every LLM_SSE_KEEPALIVE seconds while the server waits on an MCP call (a
    proxy or a client with a read timeout would otherwise take the stream for dead); the client
    hanging up then ends the call (its connection to the MCP server closes, long before the timeout)."""
    server = Server(
        LLM_WORKERS="1",
        LLM_MCP_ALLOW=f"127.0.0.1:{mcp_server.port}",
        LLM_MCP_TIMEOUT="120",
        LLM_SSE_KEEPALIVE="0.5",
    ).wait_ready()
    try:
        body = {
            "model": MODEL, "input": "Use the tool.", "stream": True, "max_output_tokens": 60,
            "temperature": 0, "max_tool_calls": 1, "tools": [mcp_tool(mcp_server, require_approval="never")],
            "tool_choice": forced("hang"),
        }  # fmt: skip
        seen: list[str] = []
        with httpx.stream("POST", server.url + "/v1/responses", json=body, timeout=60) as response:
            for line in response.iter_lines():
                if line.startswith(("event:", ": keep-alive")):
                    seen.append(line)
                waiting = seen[seen.index(CALLING) :] if CALLING in seen else []
                if waiting.count(": keep-alive") >= 3:
                    break
            assert seen[-1] == ": keep-alive" and "event: response.mcp_call.completed" not in seen, seen
            assert established_to(mcp_server.port) >= 1  # the call's connection, open while it waits
        wait_until(lambda: established_to(mcp_server.port) == 0, 30, "the call's connection closed")
    finally:
        server.stop(wait=False)


CALLING = "event: response.mcp_call.in_progress"
