"""Take the documentation's screenshots: the chat page, the status page and the dashboard, from a real server.

Run from the project root: `.venv/bin/python -m docs.screenshots` (writes docs/images/chat.png, status.png,
chat-mcp.png, dashboard.png). The chat and status pages are Chromium's screenshots of a real answer and a
real stream; chat-mcp.png a real call to the test MCP server (harness/mcp_server.py), approved on the page,
the first step's tool choice forced as the tests force it (SmolLM2 calls tools only when told to).
The dashboard is `deploy/grafana/llm-server.json` as Prometheus answers it: Debian's Prometheus scrapes a
two-worker server under a minute of mixed traffic, and each panel's queries, read from the dashboard's
file, are drawn with its title (Grafana itself is not a package here).
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import matplotlib
from playwright.sync_api import expect, sync_playwright

from harness import mcp_server
from harness.servers import ROOT, Server, prometheus

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

IMAGES = Path(__file__).resolve().parent / "images"
DASHBOARD = ROOT / "deploy" / "grafana" / "llm-server.json"


def pages(server: Server) -> None:
    """The chat page answering, and the status page with one worker generating."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=shutil.which("chromium"))
        page = browser.new_page(viewport={"width": 1100, "height": 640}, device_scale_factor=1)
        page.goto(server.url + "/")
        expect(page.locator("#model option")).not_to_have_count(0)
        page.fill("#temperature", "0")
        page.fill("#prompt", "Show me how to print hello world in Python.")
        page.press("#prompt", "Enter")
        expect(page.locator(".message.assistant").last).to_have_attribute(
            "data-state", "done", timeout=60_000
        )
        page.screenshot(path=IMAGES / "chat.png")

        body = {"prompt": "1, 2, 3,", "max_tokens": 300, "temperature": 0, "stream": True}
        streaming = threading.Event()

        def stream() -> None:
            with httpx.stream("POST", server.url + "/v1/completions", json=body, timeout=60) as answer:
                for _ in answer.iter_lines():
                    streaming.set()

        worker = threading.Thread(target=stream)
        worker.start()
        streaming.wait(30)
        page.goto(server.url + "/status")
        expect(page.locator("#workers tr[data-state=generating]")).to_have_count(1, timeout=15_000)
        page.screenshot(path=IMAGES / "status.png")
        worker.join()
        browser.close()


def mcp_page(out: Path) -> None:
    """The chat page with the calculator chosen: a call waiting for approval, approved, and its output."""
    tools = mcp_server.started()
    server = Server(
        LLM_WORKERS="1", LLM_MCP_SERVERS=json.dumps({"calc": {"url": tools.url + "/mcp"}})
    ).wait_ready()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=shutil.which("chromium"))
            page = browser.new_page(viewport={"width": 1100, "height": 760}, device_scale_factor=1)

            def forced(handled: Any) -> None:
                body = json.loads(handled.request.post_data)
                if body["input"][-1].get("role") == "user":
                    body["tool_choice"] = {"type": "mcp", "server_label": "calc", "name": "add"}
                handled.continue_(post_data=json.dumps({**body, "max_tool_calls": 1}))

            page.route("**/v1/responses", forced)
            page.goto(server.url + "/")
            expect(page.locator("#model option")).not_to_have_count(0)
            page.fill("#temperature", "0")
            page.locator("#mcp-servers input[value='calc']").check()
            page.fill("#prompt", "What is 2 plus 3?")
            page.press("#prompt", "Enter")
            page.locator(".tool.approval button.approve").click(timeout=60_000)
            expect(page.locator(".message.assistant").nth(1)).to_have_attribute(
                "data-state", "done", timeout=60_000
            )
            page.screenshot(path=out)
            browser.close()
    finally:
        server.stop()
        tools.stop(wait=False)


def traffic(server: Server, seconds: float) -> None:
    """Chat and completions from two keys for `seconds`: whole, streamed, hung up early, and some invalid."""
    keys = ["sk-alice", "sk-bob"]
    deadline = time.monotonic() + seconds

    def client(index: int) -> None:
        n = index
        while time.monotonic() < deadline:
            headers = {"Authorization": f"Bearer {keys[n % 2]}"}
            body: dict[str, Any] = {"prompt": f"Fact {n}:", "max_tokens": 8 + n % 24, "temperature": 0.7}
            path = "/v1/completions"
            if n % 2:
                body = {"messages": [{"role": "user", "content": f"Say {n}."}], "max_tokens": 16 + n % 32}
                path = "/v1/chat/completions"
            if n % 7 == 0:
                body["max_tokens"] = -1  # a client's mistake: a 400 on the errors panel
            if n % 3 == 0:  # streamed; every other such client hangs up after the first event
                body["stream"] = True
                url = server.url + path
                with httpx.stream("POST", url, json=body, headers=headers, timeout=120) as answer:
                    for line in answer.iter_lines():
                        if n % 2 and line.startswith("data: {"):
                            break
            else:
                httpx.post(server.url + path, json=body, headers=headers, timeout=120)
            n += 4

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(client, range(4)))


def dashboard(server: Server, out: Path) -> None:
    """Each panel of the dashboard, its queries answered by a real Prometheus over the traffic."""
    prom = prometheus([f"127.0.0.1:{server.port}"])
    try:
        start = time.time()
        traffic(server, seconds=75)
        end = time.time()
        panels = json.loads(DASHBOARD.read_text())["panels"]
        columns = 2
        rows = (len(panels) + columns - 1) // columns
        figure, axes = plt.subplots(rows, columns, figsize=(12, 2.6 * rows), squeeze=False)
        for axis, panel in zip(axes.flat, panels, strict=False):
            for target in panel["targets"]:
                expr = target["expr"].replace("$__rate_interval", "20s")
                params = {"query": expr, "start": start, "end": end, "step": 2}
                answer = httpx.get(prom.url + "/api/v1/query_range", params=params, timeout=30).json()
                for series in answer["data"]["result"]:
                    times = [float(t) - start for t, _ in series["values"]]
                    values = [float(v) for _, v in series["values"]]
                    label = target.get("legendFormat", "").replace("{{", "{").replace("}}", "}")
                    named = label.format_map(defaultdict(str, series["metric"])) if label else expr[:40]
                    axis.plot(times, values, label=named)
            axis.set_title(panel["title"], fontsize=10)
            axis.tick_params(labelsize=7)
            if axis.lines:
                axis.legend(fontsize=6, loc="upper left")
        for axis in axes.flat[len(panels) :]:
            axis.set_visible(False)
        figure.suptitle("deploy/grafana/llm-server.json, answered by Prometheus (seconds into the run)")
        figure.tight_layout()
        figure.savefig(out, dpi=80)
    finally:
        prom.stop()


def main() -> None:
    IMAGES.mkdir(exist_ok=True)
    server = Server(LLM_WORKERS="2", LLM_N_THREADS="1").wait_ready()
    try:
        pages(server)
    finally:
        server.stop()
    mcp_page(IMAGES / "chat-mcp.png")
    keyed = Server(LLM_WORKERS="2", LLM_N_THREADS="1", LLM_API_KEYS="alice:sk-alice,bob:sk-bob").wait_ready()
    try:
        dashboard(keyed, IMAGES / "dashboard.png")
    finally:
        keyed.stop()


if __name__ == "__main__":
    main()
