"""The OpenAPI document and the docs page, from the live server."""

from __future__ import annotations

import re
import shutil
import subprocess

import httpx
import pytest
from openapi_spec_validator import validate

from harness.servers import Server

pytestmark = pytest.mark.external


def test_live_document_is_valid(server: Server) -> None:
    document = httpx.get(server.url + "/openapi.json", timeout=10).json()
    validate(document)
    content = document["paths"]["/v1/chat/completions"]["post"]["responses"]["200"]["content"]
    assert set(content) == {"application/json", "text/event-stream"}


def test_docs_page_and_every_asset_come_from_the_server(server: Server) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as client:
        page = client.get("/docs/")
        assert page.status_code == 200
        assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert any(a.endswith("swagger-ui-bundle.js") for a in assets)
        for asset in assets:
            assert asset.startswith("/docs/"), asset  # served here, not from a CDN
            assert client.get(asset).status_code == 200, asset


def test_docs_page_renders_both_content_types_in_a_browser(server: Server) -> None:
    browser = shutil.which("chromium")
    if browser is None:
        pytest.fail("chromium is needed (.ci/run installs Debian's chromium)")
    # Deep link: Swagger UI opens the completions operation and lists its media types.
    result = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--virtual-time-budget=10000",
            "--dump-dom",
            server.url + "/docs/#/default/post_v1_completions",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    dom = result.stdout
    assert "/v1/completions" in dom, result.stderr[-2000:]
    assert "text/event-stream" in dom and "application/json" in dom
