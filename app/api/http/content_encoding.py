"""Request bodies sent compressed (Content-Encoding: gzip, deflate or zstd), inflated within the body limit.

Codex can compress its requests with zstd, Claude Code with gzip. The body is inflated
before any view reads it, at most LLM_MAX_BODY_BYTES of it (a small body that expands
past the limit is a 413, as a large one is), after the API keys' check, so that no
unauthenticated client makes the server inflate anything. Afterwards the request reads
as if it had been sent plain, relays to other workers included.
"""

from __future__ import annotations

import io
import zlib

import zstandard
from flask import Flask, request
from werkzeug.exceptions import RequestEntityTooLarge, UnsupportedMediaType

from app.api.http.errors import InvalidRequestError
from app.settings.current import current_config

SUPPORTED = ("gzip", "x-gzip", "deflate", "zstd", "identity")


def init_app(app: Flask) -> None:
    app.before_request(inflate)


def inflate() -> None:
    """Replace a compressed body with what it holds."""
    encoding = request.headers.get("Content-Encoding", "").strip().lower()
    if encoding in ("", "identity"):
        return
    if encoding not in SUPPORTED:
        raise UnsupportedMediaType(
            f"Content-Encoding {encoding!r} is not supported; send the body plain, or with gzip, "
            "deflate or zstd."
        )
    limit = current_config().max_body_bytes
    raw = request.get_data(cache=False)  # the compressed body, itself within the limit (a 413 if not)
    try:
        body = _decompressed(encoding, raw, limit)
    except (zlib.error, zstandard.ZstdError):
        raise InvalidRequestError(f"The request body is not valid {encoding} data.") from None
    if len(body) > limit:
        raise RequestEntityTooLarge(
            f"The request body inflates to more than {limit} bytes, this server's limit (LLM_MAX_BODY_BYTES)."
        )
    request.environ.pop("HTTP_CONTENT_ENCODING", None)
    request.environ["CONTENT_LENGTH"] = str(len(body))
    request._cached_data = body  # what get_data and get_json read from now on


def _decompressed(encoding: str, raw: bytes, limit: int) -> bytes:
    """At most `limit` + 1 bytes of the body (one more than allowed says it is too large)."""
    if encoding == "zstd":
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw)) as reader:
            return reader.read(limit + 1)
    # gzip's header, or zlib's (deflate as HTTP means it), or raw deflate as some clients send it.
    wbits = 16 + zlib.MAX_WBITS if encoding in ("gzip", "x-gzip") else zlib.MAX_WBITS
    if encoding == "deflate" and raw[:1] and raw[0] & 0x0F != 8:
        wbits = -zlib.MAX_WBITS
    inflater = zlib.decompressobj(wbits)
    body = inflater.decompress(raw, limit + 1)
    if not inflater.eof and not inflater.unconsumed_tail and len(body) <= limit:
        raise zlib.error("truncated")
    return body
