"""The chat page at / in a real headless Chromium, talking to the real server and model."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from PIL import Image
from playwright.sync_api import expect

from app.settings.values import default_model_path
from harness import tiny_audio_projector, tiny_projector
from harness.servers import Server
from tests.support.audio import tone
from tests.support.busy import model_busy
from tests.support.chat_page import ask, open_chat
from tests.support.waits import generations_in_flight, wait_for_log, wait_until

pytestmark = pytest.mark.external

CANCELLED = "request cancelled by its client"
# At temperature 0 the default model answers these with a fenced block, and by repeating the tag.
CODE_QUESTION = "Show me how to print hello world in Python."
HOSTILE = "<img src=x onerror=window.pwned=1>"

# Installed before a message is sent: on every change to the conversation, the length of the
# last answer's text and where the message box is.
RECORDER = """() => {
  window.lengths = [];
  window.boxes = new Set();
  const prompt = document.getElementById('prompt');
  new MutationObserver(() => {
    const bodies = document.querySelectorAll('.message.assistant .body');
    if (bodies.length) window.lengths.push(bodies[bodies.length - 1].textContent.length);
    const box = prompt.getBoundingClientRect();
    window.boxes.add([box.x, box.y, box.width, box.height].join(','));
  }).observe(document.getElementById('messages'), {subtree: true, childList: true, characterData: true});
}"""


def wait_streaming(page: Any, least: int = 30) -> None:
    """Until the answer has shown `least` characters while still streaming."""
    page.wait_for_function(
        """least => { const a = [...document.querySelectorAll('.message.assistant')].pop();
                      return a && a.dataset.state === 'streaming' && a.textContent.length > least; }""",
        arg=least,
    )


def test_an_answer_streams_in_over_several_frames_without_moving_the_page(server: Server, page: Any) -> None:
    open_chat(page, server, max_tokens="48")
    page.evaluate(RECORDER)
    page.fill("#prompt", "Name three colours")
    page.press("#prompt", "Shift+Enter")  # a new line, not a send
    page.type("#prompt", "and say why.")
    assert page.input_value("#prompt") == "Name three colours\nand say why."
    assert page.locator(".message").count() == 0
    page.press("#prompt", "Enter")
    answer = page.locator(".message.assistant").last
    expect(answer).to_have_attribute("data-state", "done")
    assert page.locator(".message.user").inner_text() == "Name three colours\nand say why."
    lengths = page.evaluate("window.lengths")
    growing = sorted(set(lengths) - {0})
    assert len(growing) >= 3, lengths  # seen part-way several times before the whole answer
    assert growing[-1] == len(answer.locator(".body").text_content())
    assert len(page.evaluate("[...window.boxes]")) == 1  # the message box never moved
    footer = answer.locator("footer").inner_text()
    assert "completion tokens" in footer and "first token after" in footer and "tokens/s" in footer, footer
    # The figures are the server's usage: 48 tokens, as asked.
    assert "+ 48 completion tokens" in footer and footer.startswith("Cut at the max tokens"), footer


def never_ending(page: Any) -> list[dict[str, Any]]:
    """Send the page's chat requests as they are, with `ignore_eos`: a sampled answer may end
    before it can be stopped (2 in 100 of the second answer here end within 30 characters).
    The bodies sent, as they leave."""
    sent: list[dict[str, Any]] = []

    def route(handled: Any) -> None:
        sent.append({**json.loads(handled.request.post_data), "ignore_eos": True})
        handled.continue_(post_data=json.dumps(sent[-1]))

    page.route("**/v1/chat/completions", route)
    return sent


def test_stop_and_escape_end_the_answer_and_the_server_frees_the_model(server: Server, page: Any) -> None:
    sent = never_ending(page)
    open_chat(page, server, temperature="0.8", max_tokens="1500")
    before = server.output().count(CANCELLED)
    answer = ask(page, "Tell me a long story about a dragon and a knight.")
    wait_streaming(page)
    page.click("#stop")
    expect(answer).to_have_attribute("data-state", "stopped")
    wait_for_log(server, CANCELLED, timeout=30, count=before + 1)
    partial = answer.locator(".body").inner_text()
    assert len(partial) > 30  # the partial answer stays on screen
    expect(answer.locator("footer")).to_contain_text("Stopped")
    wait_until(lambda: generations_in_flight(server) == 0, 30, "the sequence freed")
    assert answer.locator(".body").inner_text() == partial
    expect(page.locator("#send")).to_be_visible()

    second = ask(page, "Now tell me another long story, about a ship.")
    wait_streaming(page)
    page.keyboard.press("Escape")
    expect(second).to_have_attribute("data-state", "stopped")
    wait_for_log(server, CANCELLED, timeout=30, count=before + 2)
    assert "cancelled=True" in server.output()
    assert [body["temperature"] for body in sent] == [0.8, 0.8]  # the page's own requests, both stopped


def test_a_fenced_code_block_is_rendered_as_code(server: Server, page: Any) -> None:
    open_chat(page, server, max_tokens="120")
    answer = ask(page, CODE_QUESTION)
    expect(answer).to_have_attribute("data-state", "done")
    # However many blocks the model writes (its greedy answer differs between CPUs' kernels), its
    # Python is rendered as code blocks, not as text.
    code = answer.locator("pre > code.language-python")
    expect(code.first).to_be_visible()
    assert any('print("Hello, World!")' in block for block in code.all_inner_texts())


def test_html_from_the_model_is_shown_as_text_and_never_runs(server: Server, page: Any) -> None:
    open_chat(page, server)
    answer = ask(page, f"Repeat exactly: {HOSTILE}")
    expect(answer).to_have_attribute("data-state", "done")
    assert HOSTILE in answer.locator(".body").inner_text()  # the model wrote the tag: it shows as text
    assert page.locator(".message img").count() == 0
    assert page.evaluate("window.pwned") is None


def test_on_a_phone_sized_screen(server: Server, browser: Any) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    try:
        page.goto(server.url + "/")
        expect(page.locator("#settings")).to_be_hidden()  # folded away, one tap from the bar
        page.click("#settings-toggle")
        expect(page.locator("#settings")).to_be_visible()
        expect(page.locator("#model option")).not_to_have_count(0)
        page.fill("#max-tokens", "32")
        page.click("#settings-toggle")
        expect(page.locator("#settings")).to_be_hidden()
        page.evaluate(RECORDER)
        answer = ask(page, "Name a colour.")
        expect(answer).to_have_attribute("data-state", "done")
        box = page.locator("#prompt").bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390 and box["y"] + box["height"] <= 844
        assert page.evaluate("document.documentElement.scrollWidth") <= 390  # nothing wider than the phone
        assert len(page.evaluate("[...window.boxes]")) == 1
    finally:
        context.close()


def test_errors_from_the_server_are_told_in_words(start_server: Callable[..., Server], page: Any) -> None:
    key, operator = "ui-test-key-3f9a", "ui-test-ops-7c1e"
    server = start_server(
        LLM_API_KEYS=key,
        LLM_ADMIN_KEYS=operator,
        LLM_METRICS_AUTH="1",
        LLM_PARALLEL="1",
        LLM_MAX_QUEUE="0",
        LLM_N_THREADS="1",
    )
    page.goto(server.url + "/")
    expect(page.locator("#key-field")).to_be_visible()
    expect(page.locator("#notice")).to_contain_text("needs an API key")  # /v1/models said 401
    answer = ask(page, "Hello")
    expect(answer).to_have_attribute("data-state", "error")
    expect(answer).to_contain_text("needs an API key")
    assert page.input_value("#prompt") == "Hello"  # kept, to send again

    page.fill("#api-key", key)
    page.press("#api-key", "Tab")  # the change reloads the models with the key
    expect(page.locator("#model option")).to_have_count(1)
    page.fill("#max-tokens", "100000000")
    expect(ask(page, "Hello")).to_contain_text("Error 400: max_tokens")

    page.fill("#max-tokens", "16")
    auth = {"Authorization": f"Bearer {key}"}
    with model_busy(server.port, headers=auth):  # a long stream holds the only sequence
        busy = ask(page, "Hello")
        expect(busy).to_have_attribute("data-state", "error")
        expect(busy).to_contain_text("The server is busy: try again in")

    figures = {"Authorization": f"Bearer {operator}"}  # every key's usage is in them: the operator's

    def running() -> int:
        workers = httpx.get(server.url + "/health/workers", headers=figures, timeout=10).json()["data"]
        return sum(w["running"] for w in workers)

    # The hung-up stream's sequence comes back once the worker has seen the hang-up.
    wait_until(lambda: running() == 0, 30, "the long stream's sequence freed")
    expect(ask(page, "Hello")).to_have_attribute("data-state", "done")

    assert httpx.get(server.url + "/health/workers", timeout=10).status_code == 401
    assert httpx.get(server.url + "/health/workers", headers=auth, timeout=10).status_code == 403
    assert httpx.get(server.url + "/health/workers", headers=figures, timeout=10).status_code == 200
    assert key not in server.output() and operator not in server.output()


def test_an_error_after_the_200_is_told_too(start_server: Callable[..., Server], page: Any) -> None:
    # Queued past LLM_QUEUE_TIMEOUT, a stream that has had its 200 ends with an error event.
    server = start_server(LLM_PARALLEL="1", LLM_QUEUE_TIMEOUT="1", LLM_SSE_KEEPALIVE="0.3", LLM_N_THREADS="1")
    open_chat(page, server)
    with model_busy(server.port):
        answer = ask(page, "Hello")
        expect(answer).to_have_attribute("data-state", "error")
    expect(answer).to_contain_text("The answer broke off: The request waited")
    expect(page.locator("#notice")).to_contain_text("The answer broke off")


def test_an_image_attached_on_the_page_is_sent_shown_and_answered(page: Any, start_server: Any) -> None:
    vision = start_server(LLM_MMPROJ=str(tiny_projector.cached(default_model_path())))
    open_chat(page, vision, max_tokens="16")
    expect(page.locator("#attach")).to_be_visible()  # this model sees
    red = io.BytesIO()
    Image.new("RGB", (80, 60), (200, 30, 30)).save(red, format="PNG")
    page.set_input_files(
        "#attach-input", files=[{"name": "red.png", "mimeType": "image/png", "buffer": red.getvalue()}]
    )
    expect(page.locator("#attachments img")).to_have_count(1)
    answer = ask(page, "What is in this picture?")
    expect(answer).to_have_attribute("data-state", "done")
    expect(page.locator(".message.user img.attached")).to_have_count(1)
    expect(page.locator("#attachments img")).to_have_count(0)  # sent, no longer pending
    # The page sent the image as chat completions' image_url part: the SDK's request counts the same.
    url = "data:image/png;base64," + base64.b64encode(red.getvalue()).decode()
    parts = [
        {"type": "text", "text": "What is in this picture?"},
        {"type": "image_url", "image_url": {"url": url}},
    ]
    body = {"messages": [{"role": "user", "content": parts}], "max_tokens": 1}
    expected = httpx.post(vision.url + "/v1/chat/completions", json=body, timeout=60).json()["usage"][
        "prompt_tokens"
    ]
    assert f"{expected} prompt" in answer.locator("footer").inner_text()


def test_a_text_only_model_offers_no_image_button(server: Server, page: Any) -> None:
    open_chat(page, server)
    expect(page.locator("#attach")).to_be_hidden()


def test_an_audio_clip_attached_on_the_page_is_sent_shown_and_answered(page: Any, start_server: Any) -> None:
    hearing = start_server(LLM_MMPROJ=str(tiny_audio_projector.cached(default_model_path())))
    open_chat(page, hearing, max_tokens="8")
    expect(page.locator("#attach-audio")).to_be_visible()  # this model hears
    expect(page.locator("#attach")).to_be_hidden()  # and does not see
    clip = tone(1.5)
    page.set_input_files(
        "#attach-audio-input", files=[{"name": "tone.wav", "mimeType": "audio/wav", "buffer": clip}]
    )
    expect(page.locator("#attachments .clip")).to_have_text("♪ tone.wav")
    answer = ask(page, "What do you hear?")
    # 750 audio tokens to evaluate first: seconds on a busy machine.
    expect(answer).to_have_attribute("data-state", "done", timeout=120_000)
    expect(page.locator(".message.user audio.attached")).to_have_count(1)
    expect(page.locator("#attachments .clip")).to_have_count(0)  # sent, no longer pending
    # The page sent the clip as chat completions' input_audio part: the same request counts the same.
    audio = {"data": base64.b64encode(clip).decode(), "format": "wav"}
    parts = [{"type": "text", "text": "What do you hear?"}, {"type": "input_audio", "input_audio": audio}]
    body = {"messages": [{"role": "user", "content": parts}], "max_tokens": 1}
    expected = httpx.post(hearing.url + "/v1/chat/completions", json=body, timeout=120).json()["usage"]
    assert f"{expected['prompt_tokens']} prompt" in answer.locator("footer").inner_text()
