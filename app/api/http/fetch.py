"""Media URLs, fetched only where an operator allows (LLM_MEDIA_FETCH): a server that fetches what
clients name is otherwise a way into the networks it can reach (SSRF).

A URL is fetched when its host (or a URL prefix) is listed; every address its name resolves to
must be public, unless the URL names a listed IP address itself (a name that resolves inside the
network is how rebinding attacks get in). The connection goes to the address that was checked,
not to a second lookup. Redirects are followed only on the same host, each checked again; the
body is bounded by LLM_MAX_MEDIA_BYTES and the whole fetch by LLM_MEDIA_FETCH_TIMEOUT.
"""

from __future__ import annotations

import time
from urllib.parse import urljoin, urlsplit

import urllib3

from app.api.http import destinations, media
from app.api.http.destinations import Destination
from app.api.http.media import MediaError
from app.settings.current import current_config

MAX_REDIRECTS = 3


def media_at(url: str, field: str) -> bytes:
    """A medium a client names by URL: a data URL's bytes, or an http(s) URL's, fetched if allowed."""
    if url.startswith(("http://", "https://")):
        return fetch(url, field)
    return media.from_data_url(url, field)


def fetch(url: str, field: str) -> bytes:
    """The bytes at `url`, if the operator allows it; MediaError (400) or a 413 otherwise."""
    config = current_config()
    if not config.media_fetch:
        raise MediaError(
            "this server does not fetch media URLs (LLM_MEDIA_FETCH is off); send the image as a "
            "data URL (data:image/png;base64,...)",
            field,
        )
    deadline = time.monotonic() + config.media_fetch_timeout
    first = urlsplit(url).hostname
    for _ in range(MAX_REDIRECTS + 1):
        target = _cleared(url, config.media_fetch, field)
        found = _get(target, deadline, config.max_media_bytes, field)
        if isinstance(found, bytes):
            return found
        url = urljoin(url, found)
        if urlsplit(url).hostname != first:
            raise MediaError(
                f"the URL redirects to another host ({urlsplit(url).hostname}); not followed", field
            )
    raise MediaError(f"the URL redirects more than {MAX_REDIRECTS} times", field)


def _cleared(url: str, allowlist: tuple[str, ...], field: str) -> Destination:
    try:
        return destinations.cleared(url, allowlist, "LLM_MEDIA_FETCH", "fetches media from")
    except destinations.RefusedError as refused:
        message = str(refused)
        if message == "must be an http(s) URL":
            message = "must be an http(s) URL or a data URL"
        raise MediaError(message, field) from None


def _get(target: Destination, deadline: float, limit: int, field: str) -> bytes | str:
    """The body (bytes), or a redirect's Location (str)."""
    left = max(0.1, deadline - time.monotonic())
    timeout = urllib3.Timeout(connect=left, read=left)
    pool: urllib3.HTTPConnectionPool
    if target.https:
        pool = urllib3.HTTPSConnectionPool(
            target.address,
            target.port,
            timeout=timeout,
            server_hostname=target.host,
            assert_hostname=target.host,
        )
    else:
        pool = urllib3.HTTPConnectionPool(target.address, target.port, timeout=timeout)
    host = target.host if target.port in (80, 443) else f"{target.host}:{target.port}"
    try:
        with pool:
            answer = pool.urlopen(
                "GET",
                target.path,
                headers={"Host": host, "User-Agent": "llm-server media fetch"},
                redirect=False,
                retries=False,
                preload_content=False,
            )
            if answer.status in (301, 302, 303, 307, 308) and answer.headers.get("Location"):
                return str(answer.headers["Location"])
            if answer.status != 200:
                raise MediaError(f"fetching the URL answered {answer.status}", field)
            return _body(answer, deadline, limit, field)
    except urllib3.exceptions.TimeoutError:
        raise MediaError("fetching the URL took longer than LLM_MEDIA_FETCH_TIMEOUT", field) from None
    except urllib3.exceptions.HTTPError as exc:
        raise MediaError(f"the URL could not be fetched ({type(exc).__name__})", field) from None


def _body(answer: urllib3.BaseHTTPResponse, deadline: float, limit: int, field: str) -> bytes:
    declared = answer.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise media.too_large(field, limit)
    body = bytearray()
    for piece in answer.stream(64 * 1024):
        body += piece
        if len(body) > limit:
            raise media.too_large(field, limit)
        if time.monotonic() > deadline:
            raise MediaError("fetching the URL took longer than LLM_MEDIA_FETCH_TIMEOUT", field)
    return bytes(body)
