"""Driving the chat page in Playwright: open it on a server, ask a question."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from harness.servers import Server


def open_chat(page: Any, server: Server, temperature: str = "0", max_tokens: str = "64") -> None:
    page.goto(server.url + "/")
    expect(page.locator("#model option")).not_to_have_count(0)  # /v1/models has answered
    page.fill("#temperature", temperature)
    page.fill("#max-tokens", max_tokens)


def ask(page: Any, text: str) -> Any:
    """Type `text`, press Enter; the answer's element."""
    page.fill("#prompt", text)
    page.press("#prompt", "Enter")
    return page.locator(".message.assistant").last
