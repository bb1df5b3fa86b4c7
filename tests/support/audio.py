"""Audio clips for the tests: WAV files of a sine tone, written with the standard library."""

from __future__ import annotations

import array
import io
import math
import wave

RATE = 16000


def tone(seconds: float, hertz: float = 440.0) -> bytes:
    """A 16 kHz mono 16-bit WAV of a sine tone `seconds` long."""
    samples = array.array(
        "h", (int(8000 * math.sin(2 * math.pi * hertz * n / RATE)) for n in range(int(seconds * RATE)))
    )
    out = io.BytesIO()
    with wave.open(out, "wb") as file:
        file.setnchannels(1)
        file.setsampwidth(2)
        file.setframerate(RATE)
        file.writeframes(samples.tobytes())
    return out.getvalue()
