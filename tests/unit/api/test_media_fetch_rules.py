"""Which media URLs an operator's LLM_MEDIA_FETCH lets the server fetch, and how the setting is read."""

from __future__ import annotations

import pytest

from app.api.http.destinations import listed
from app.settings.values import fetch_allowlist

ALLOWED = ("images.example.com", "127.0.0.1:8080", "https://cdn.example.org/public/")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://images.example.com/cat.png", True),
        ("http://IMAGES.example.com:81/cat.png", False),  # a host entry without a port: the default one
        ("http://127.0.0.1:8080/red.png", True),
        ("http://127.0.0.1:8081/red.png", False),
        ("https://cdn.example.org/public/a/b.png", True),
        ("https://cdn.example.org/private/b.png", False),
        ("https://cdn.example.org/publicity.png", False),  # a prefix ends at a path boundary
        ("https://evil.example.com/?x=images.example.com", False),
        ("https://images.example.com.evil.net/cat.png", False),
    ],
)
def test_a_url_is_listed_by_its_host_or_a_prefix(url: str, expected: bool) -> None:
    assert listed(url, ALLOWED) is expected


def test_the_setting_takes_hosts_and_url_prefixes_and_names_what_is_neither() -> None:
    assert fetch_allowlist(" images.example.com , https://cdn.example.org/x/ ") == (
        "images.example.com",
        "https://cdn.example.org/x/",
    )
    with pytest.raises(ValueError, match="not a URL prefix"):
        fetch_allowlist("ftp://files.example.com/")
    with pytest.raises(ValueError, match="not a host"):
        fetch_allowlist("images.example.com/path")
