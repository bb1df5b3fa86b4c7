"""The SSRF matrix: every form of an internal address a client may put in an image's or an MCP server's
URL is refused unless the operator listed that destination itself (destinations.cleared, which media
fetching and MCP both pass through).

Loopback, link-local (the cloud metadata service), private and unspecified addresses, in IPv4,
IPv6, IPv4-mapped, decimal, octal and hexadecimal forms; names that resolve inside the network
(localhost, a rebinding name with a public and a private address); userinfo and fragment tricks;
schemes other than http(s). The real server's refusal, in the protocol's shape, is in
tests/integration/security/test_security_matrix.py.
"""

from __future__ import annotations

import socket
from typing import Any

import pytest

from app.api.http.destinations import RefusedError, cleared, listed

INTERNAL = [
    "http://127.0.0.1/", "http://127.0.0.1:8000/v1/models", "http://127.1/", "http://2130706433/",
    "http://0x7f000001/", "http://0177.0.0.1/", "http://0x7f.0.0.1/", "http://[::1]/", "http://[::]/",
    "http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]/", "http://0.0.0.0/", "http://0/",
    "http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/", "http://[fd00:ec2::254]/",
    "http://10.0.0.1/", "http://172.16.0.1/", "http://192.168.1.1/", "http://100.64.0.1/",
    "http://localhost/", "http://LOCALHOST:8000/", "http://metadata.google.internal/",
    "http://images.example.com@127.0.0.1/", "http://127.0.0.1#@images.example.com/",
    "http://rebind.example/", "https://rebind.example/",
]  # fmt: skip
NOT_HTTP = ["file:///etc/passwd", "gopher://127.0.0.1/", "ftp://images.example.com/a.png", "//127.0.0.1/",
            "javascript:alert(1)", "data:image/png;base64,AAAA"]  # fmt: skip
PUBLIC, PRIVATE = "93.184.216.34", "10.0.0.5"


@pytest.fixture(autouse=True)
def dns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Names of the matrix resolve as an attacker's would (no network here): others as the system says."""
    real = socket.getaddrinfo

    def resolve(host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        answers = {"rebind.example": [PUBLIC, PRIVATE], "public.example": [PUBLIC]}.get(host)
        if answers is None:
            return real(host, port, *args, **kwargs)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in answers]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)


@pytest.mark.parametrize("url", INTERNAL + NOT_HTTP)
def test_an_internal_destination_is_refused_when_the_operator_lists_nothing_or_something_else(
    url: str,
) -> None:
    for allowlist in ((), ("images.example.com", "public.example")):
        with pytest.raises(RefusedError):
            cleared(url, allowlist, "LLM_MCP_ALLOW", "connects to")


# The operator lists the URL's very host, as a name or a spelling of an address that is not the
# address itself: what it resolves to inside the network is still refused.
LISTED_YET_REFUSED = [
    ("http://127.1/", "127.1"), ("http://2130706433/", "2130706433"), ("http://0x7f000001/", "0x7f000001"),
    ("http://0177.0.0.1/", "0177.0.0.1"), ("http://0x7f.0.0.1/", "0x7f.0.0.1"), ("http://0/", "0"),
    ("http://localhost/", "localhost"), ("http://LOCALHOST:8000/", "localhost:8000"),
    ("http://metadata.google.internal/", "metadata.google.internal"),
    ("http://rebind.example/", "rebind.example"), ("https://rebind.example/", "rebind.example"),
]  # fmt: skip
# The address itself, listed: the operator allowed exactly that destination.
LISTED_ADDRESSES = [
    ("http://127.0.0.1:8000/mcp", "127.0.0.1:8000", "127.0.0.1"), ("http://[::1]/", "[::1]", "::1"),
    ("http://169.254.169.254/x", "169.254.169.254", "169.254.169.254"),
    ("http://[::ffff:7f00:1]/", "[::ffff:7f00:1]", "::ffff:7f00:1"),
    ("http://10.0.0.1/", "10.0.0.1", "10.0.0.1"),
]  # fmt: skip


@pytest.mark.parametrize(("url", "entry"), LISTED_YET_REFUSED)
def test_listing_a_name_or_another_spelling_does_not_open_the_address_behind_it(url: str, entry: str) -> None:
    with pytest.raises(RefusedError, match="private or loopback|does not resolve"):
        cleared(url, (entry,), "LLM_MCP_ALLOW", "connects to")


@pytest.mark.parametrize(("url", "entry", "address"), LISTED_ADDRESSES)
def test_an_address_the_operator_listed_itself_is_reached(url: str, entry: str, address: str) -> None:
    assert cleared(url, (entry,), "LLM_MCP_ALLOW", "connects to").address == address


def test_a_public_name_is_cleared_and_pinned_to_the_address_that_was_checked() -> None:
    found = cleared(
        "http://public.example:8080/mcp", ("public.example:8080",), "LLM_MCP_ALLOW", "connects to"
    )
    assert (found.address, found.host, found.port, found.path) == (PUBLIC, "public.example", 8080, "/mcp")


def test_the_refusal_names_the_setting_and_no_address_is_tried() -> None:
    with pytest.raises(RefusedError, match="LLM_MEDIA_FETCH"):
        cleared("http://localhost/a.png", ("localhost",), "LLM_MEDIA_FETCH", "fetches media from")


PREFIX = "https://tools.example/public/"


@pytest.mark.parametrize(
    "url",
    [
        "https://tools.example/public/../admin", "https://tools.example/public/%2e%2e/admin",
        "https://tools.example/public/%2E%2E/admin", "https://tools.example/public/.%2e/admin",
        "https://tools.example/public/x%2f..%2f..%2fadmin", "https://tools.example/public/..\\admin",
        "https://tools.example/public/./../admin", "https://tools.example/publicity/",
        "https://tools.example:8443/public/x", "http://tools.example/public/x",
        "https://user@tools.example/public/x", "https://tools.example.evil/public/x",
    ],
)  # fmt: skip
def test_a_url_prefix_covers_only_paths_under_it_as_a_server_reads_them(url: str) -> None:
    assert not listed(url, (PREFIX,))


@pytest.mark.parametrize(
    "url",
    ["https://tools.example/public/", "https://tools.example/public/mcp", "https://TOOLS.example:443/public/a/b",
     "https://tools.example/public", "https://tools.example/public/a.b/c..d?x=../y"],
)  # fmt: skip
def test_a_url_under_a_listed_prefix_is_listed(url: str) -> None:
    assert listed(url, (PREFIX,))
