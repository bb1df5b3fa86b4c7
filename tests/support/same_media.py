"""The media a comparison hands llama-server: what this server decodes, written losslessly.

The server decodes a client's images with Pillow and its audio with libsndfile and libsoxr
(app/engine/multimodal/decoding.py); llama-server decodes with stb_image and miniaudio, which agree to
the bit on PNG and on a 16 kHz mono WAV but not on a JPEG (a few levels) or a resampled MP3. So a test
that compares answers gives llama-server the pixels and samples this server decoded, as a PNG and as
a 16 kHz float WAV, which its decoders read exactly: the comparison is then of everything after the
decoding.
"""

from __future__ import annotations

import base64
import io
import wave
from typing import Any

import numpy as np
from PIL import Image

from app.engine.multimodal import decoding

RATE = 16000  # the test projectors' (Whisper's)


def image(data: bytes) -> bytes:
    """A PNG of the pixels the server decodes `data` to."""
    width, height, rgb = decoding.pixels(data, 1 << 30)
    out = io.BytesIO()
    Image.frombytes("RGB", (width, height), rgb).save(out, format="PNG")
    return out.getvalue()


def audio(data: bytes, rate: int = RATE) -> bytes:
    """A mono 32-bit float WAV of the samples the server decodes `data` to, at `rate`."""
    samples = decoding.samples(data, rate, 1e9)
    out = io.BytesIO()
    with wave.open(out, "wb") as file:  # (the wave module writes PCM: its header is patched below)
        file.setnchannels(1)
        file.setsampwidth(4)
        file.setframerate(rate)
        file.writeframes(np.asarray(samples, dtype="<f4").tobytes())
    written = bytearray(out.getvalue())
    written[20:22] = (3).to_bytes(2, "little")  # WAVE_FORMAT_IEEE_FLOAT
    return bytes(written)


def messages(asked: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages with each image (a data URL) and audio clip (input_audio) as `image` and `audio`
    make them."""

    def part(item: dict[str, Any]) -> dict[str, Any]:
        if item.get("type") == "image_url" and item["image_url"]["url"].startswith("data:"):
            data = base64.b64decode(item["image_url"]["url"].split(",", 1)[1])
            url = "data:image/png;base64," + base64.b64encode(image(data)).decode()
            return {**item, "image_url": {**item["image_url"], "url": url}}
        if item.get("type") == "input_audio":
            data = base64.b64decode(item["input_audio"]["data"])
            return {**item, "input_audio": {"data": base64.b64encode(audio(data)).decode(), "format": "wav"}}
        return item

    return [
        {**message, "content": [part(item) for item in message["content"]]}
        if isinstance(message.get("content"), list)
        else message
        for message in asked
    ]
