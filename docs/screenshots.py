"""Take the README's screenshots of the chat and status pages: a real server, a real answer, Chromium.

Run from the project root: `.venv/bin/python -m docs.screenshots` (writes docs/chat.png, docs/status.png).
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import httpx
from playwright.sync_api import expect, sync_playwright

from harness.servers import Server

DOCS = Path(__file__).resolve().parent


def main() -> None:
    server = Server(LLM_WORKERS="2", LLM_N_THREADS="1").wait_ready()
    try:
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
            page.screenshot(path=DOCS / "chat.png")

            # One worker busy with a stream while the status page refreshes.
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
            page.screenshot(path=DOCS / "status.png")
            worker.join()
            browser.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
