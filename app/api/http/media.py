"""Media in messages: decoded from each protocol's parts, carried in the content text, cut out again.

A content part with an image or audio clip becomes a marker in the message's text that holds
the medium itself (base64): it travels through every copy, edit and chat template a message
goes through, and the rendered prompt gives the media back in the order the template wrote
them. The marker's tag is random per process, so a client's text cannot pose as one.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
import secrets

import imagesize
import mutagen
from mutagen.flac import FLAC
from mutagen.mp3 import MP3
from mutagen.wave import WAVE

from app.api.http.errors import PayloadTooLargeError
from app.engine.multimodal.projector import MARKER
from app.settings.current import current_config

_TAG = secrets.token_hex(6)
_EMBEDDED = re.compile(rf"<\|media-{_TAG}:(image|audio):([A-Za-z0-9+/=]*)\|>")

# llama-server's marker, shown where a medium sits in a prompt's text (/apply-template).
SHOWN = "<__media__>"

# What chat completions' input_audio says a clip is: OpenAI's two, and FLAC, which mtmd decodes too
# (the bytes are what counts).
AUDIO_FORMATS = ("wav", "mp3", "flac")


class MediaError(ValueError):
    """A medium a client sent that cannot be used: the message says why, `field` names the part's key."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


def embed(kind: str, data: bytes, field: str = "") -> str:
    """The marker that stands for an image or audio clip in a message's text (its header checked first)."""
    if kind == "image":
        _check_image(data, field)
    else:
        audio_seconds(data, field)
    return marker(kind, data)


def marker(kind: str, data: bytes) -> str:
    """The marker for a medium already checked (`embed` checks it first)."""
    return f"<|media-{_TAG}:{kind}:{base64.b64encode(data).decode()}|>"


def _check_image(data: bytes, field: str) -> None:
    """An image's size from its header, before anything decodes it: a few bytes can declare pixels
    enough to fill the memory (LLM_MAX_IMAGE_PIXELS)."""
    width, height = imagesize.get(io.BytesIO(data))
    if width <= 0 or height <= 0:
        raise MediaError("is not an image this server reads (PNG, JPEG, GIF or BMP)", field)
    limit = current_config().max_image_pixels
    if width * height > limit:
        raise MediaError(
            f"is {width}x{height} pixels, more than this server takes (LLM_MAX_IMAGE_PIXELS={limit})", field
        )


def audio_seconds(data: bytes, field: str) -> float:
    """An audio clip's length from its headers, before anything decodes it: a clip becomes 750
    tokens per 30 seconds or so (LLM_MAX_AUDIO_SECONDS)."""
    try:
        found = mutagen.File(io.BytesIO(data))
    except (mutagen.MutagenError, ValueError, EOFError):
        found = None
    # The formats llama.cpp's mtmd decodes (miniaudio's WAV, MP3 and FLAC decoders).
    seconds = float(getattr(found.info, "length", 0) or 0) if isinstance(found, (WAVE, MP3, FLAC)) else 0.0
    if seconds <= 0:
        raise MediaError("is not an audio file this server reads (WAV, MP3 or FLAC)", field)
    limit = current_config().max_audio_seconds
    if seconds > limit:
        raise MediaError(
            f"is {seconds:.1f} seconds long, more than this server takes (LLM_MAX_AUDIO_SECONDS={limit:g})",
            field,
        )
    return seconds


def extract(text: str) -> tuple[str, list[bytes], list[str]]:
    """A rendered prompt with each embedded medium replaced by the projector's marker: the text, the
    media in order, and their kinds."""
    media: list[bytes] = []
    kinds: list[str] = []

    def cut(found: re.Match[str]) -> str:
        kinds.append(found.group(1))
        media.append(base64.b64decode(found.group(2)))
        return MARKER

    return _EMBEDDED.sub(cut, text), media, kinds


def pieces(text: str) -> list[tuple[str, str]]:
    """Text with embedded media as (kind, value) in order: ("text", text), ("image", data URL) or
    ("audio", base64): how a stored message's content is handed back in a protocol's parts."""
    found: list[tuple[str, str]] = []
    last = 0
    for match in _EMBEDDED.finditer(text):
        if match.start() > last:
            found.append(("text", text[last : match.start()]))
        kind, data = match.group(1), match.group(2)
        found.append((kind, f"data:{_image_type(data)};base64,{data}" if kind == "image" else data))
        last = match.end()
    if last < len(text) or not found:
        found.append(("text", text[last:]))
    return found


def _image_type(data: str) -> str:
    """The media type an image's first bytes say (base64 of them)."""
    head = base64.b64decode(data[:16])
    for magic, kind in ((b"\x89PNG", "image/png"), (b"\xff\xd8", "image/jpeg"), (b"GIF8", "image/gif")):
        if head.startswith(magic):
            return kind
    return "image/webp" if head[8:12] == b"WEBP" else "application/octet-stream"


def shown(text: str) -> str:
    """The prompt's text as llama-server shows it: its marker where each medium is."""
    return _EMBEDDED.sub(SHOWN, text)


def has_media(text: str) -> bool:
    return _EMBEDDED.search(text) is not None


def from_base64(data: str, field: str) -> bytes:
    """Base64 (standard or URL-safe, padded or not) to bytes, within LLM_MAX_MEDIA_BYTES (a 413)."""
    cleaned = re.sub(r"\s+", "", data)
    try:
        if "-" in cleaned or "_" in cleaned:
            decoded = base64.urlsafe_b64decode(cleaned + "=" * (-len(cleaned) % 4))
        else:
            decoded = base64.b64decode(cleaned + "=" * (-len(cleaned) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise MediaError("is not valid base64", field) from None
    return within_limit(decoded, field)


def within_limit(data: bytes, field: str) -> bytes:
    limit = current_config().max_media_bytes
    if len(data) > limit:
        raise too_large(field, limit)
    return data


def too_large(field: str, limit: int) -> PayloadTooLargeError:
    return PayloadTooLargeError(
        f"{field}: the medium is larger than this server takes (LLM_MAX_MEDIA_BYTES={limit})",
        param=field,
        code="media_too_large",
    )


def from_data_url(url: str, field: str) -> bytes:
    """The bytes of a `data:<type>;base64,<data>` URL."""
    head, comma, data = url.partition(",")
    if not head.startswith("data:") or not comma or not head.endswith(";base64"):
        raise MediaError(
            "must be a data URL with base64 data (data:image/png;base64,...) or an http(s) URL", field
        )
    return from_base64(data, field)
