"""A client's image or audio clip decoded by a fuzzed library into what mtmd takes: pixels, samples.

llama.cpp's own helper (mtmd_helper_bitmap_init_from_buf) decodes whatever bytes it is handed with
stb_image and miniaudio, single-header decoders with a history of memory-safety bugs; no byte a
client sends reaches them here. Images are decoded by Pillow (PNG, JPEG, GIF, BMP, WebP; the first
frame of an animation, as stb_image reads it) into 8-bit RGB, handed over with mtmd_bitmap_init;
audio by libsndfile (WAV, FLAC, MP3, through soundfile) into float samples, mixed to mono and
resampled to the projector's rate with libsoxr, handed over with mtmd_bitmap_init_from_audio.
Pillow and libsndfile are fuzzed continuously on OSS-Fuzz. PNG, GIF, BMP and 16 kHz WAV give the
pixels and samples stb_image and miniaudio gave; a JPEG's pixels differ by a few levels (decoders
need not agree to the bit), and a clip at another rate is resampled by another filter.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import soundfile
import soxr
from PIL import Image

IMAGE_FORMATS = ["PNG", "JPEG", "GIF", "BMP", "WEBP"]
AUDIO_FORMATS = {"WAV", "FLAC", "MP3"}


class MediaDecodeError(ValueError):
    """The bytes are not an image or clip this server decodes; the message says which."""


def pixels(data: bytes, max_pixels: int) -> tuple[int, int, bytes]:
    """The image's width, height and 8-bit RGB pixels, row by row (alpha dropped, as stb_image drops
    it); at most `max_pixels` of them (the header was checked before; this holds whatever it said)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data), formats=IMAGE_FORMATS)
            if image.width * image.height > max_pixels:
                raise MediaDecodeError(f"is {image.width}x{image.height} pixels, more than this server takes")
            image.seek(0)
            image.load()
    except MediaDecodeError:
        raise
    except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError, Warning) as exc:
        raise MediaDecodeError(f"is not an image this server decodes ({type(exc).__name__})") from None
    if image.mode in ("I;16", "I;16B", "I;16L", "I"):  # 16-bit grey: its high byte, as stb_image keeps
        grey = (np.asarray(image, dtype=np.uint32) >> 8).astype(np.uint8)
        rgb = np.repeat(grey[:, :, None], 3, axis=2)
    else:
        rgb = np.asarray(image.convert("RGB"), dtype=np.uint8)
    return image.width, image.height, np.ascontiguousarray(rgb).tobytes()


def samples(data: bytes, rate: int, max_seconds: float) -> np.ndarray:
    """The clip as float32 mono samples at `rate` (the projector's); at most `max_seconds` long."""
    try:
        with soundfile.SoundFile(io.BytesIO(data)) as clip:
            if clip.format not in AUDIO_FORMATS:
                raise MediaDecodeError("is not an audio file this server decodes (WAV, MP3 or FLAC)")
            if clip.frames > max_seconds * clip.samplerate + clip.samplerate:
                raise MediaDecodeError(f"is longer than the {max_seconds:g} seconds this server takes")
            decoded = clip.read(dtype="float32", always_2d=True)
            source_rate = clip.samplerate
    except MediaDecodeError:
        raise
    except (soundfile.LibsndfileError, RuntimeError, ValueError, TypeError) as exc:
        raise MediaDecodeError(f"is not an audio file this server decodes ({type(exc).__name__})") from None
    if not len(decoded):
        raise MediaDecodeError("holds no audio")
    mono = decoded.mean(axis=1, dtype=np.float32) if decoded.shape[1] > 1 else decoded[:, 0]
    if source_rate != rate:
        mono = soxr.resample(mono, source_rate, rate, quality="HQ").astype(np.float32)
    return np.ascontiguousarray(mono, dtype=np.float32)
