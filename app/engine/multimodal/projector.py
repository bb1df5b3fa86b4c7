"""A model's multimodal projector (llama.cpp's mtmd): what it hears and sees, prompts cut into text
and media runs, and a run's embeddings evaluated into a sequence's cells."""

from __future__ import annotations

import ctypes
import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

import llama_cpp
import numpy as np
from gevent.threadpool import ThreadPool
from llama_cpp import mtmd_cpp as mtmd
from llama_cpp._logger import llama_log_callback

from app.engine.errors import PromptRejectedError
from app.engine.gguf import gguf_metadata
from app.engine.media import MediaRun, placeholder
from app.engine.multimodal import decoding

# Where a medium goes in a rendered prompt: random per process, so no client text can pose as one.
MARKER = f"<__media_{secrets.token_hex(8)}__>"

_NO_CALLBACK = mtmd.mtmd_helper_post_decode_callback()  # a null function pointer: nothing after each batch
_KINDS = {mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE: "image", mtmd.MTMD_INPUT_CHUNK_TYPE_AUDIO: "audio"}


@dataclass(frozen=True)
class Capabilities:
    """What a projector takes in."""

    vision: bool
    audio: bool
    audio_sample_rate: int | None

    def as_json(self) -> dict[str, bool]:
        """llama-server's `modalities`."""
        return {"vision": self.vision, "audio": self.audio}


def capabilities_of(path: str | None) -> Capabilities:
    """What a projector file takes in, read from its header alone (no model loaded); the audio sample
    rate is known once it is loaded (`Projector.capabilities`). None: a text-only model."""
    if path is None:
        return Capabilities(False, False, None)
    header = gguf_metadata.of(path)
    return Capabilities(
        bool(header.get("clip.has_vision_encoder")), bool(header.get("clip.has_audio_encoder")), None
    )


@dataclass(frozen=True)
class MediaLimits:
    """What one medium may hold once decoded (the server's LLM_MAX_IMAGE_PIXELS, LLM_MAX_AUDIO_SECONDS)."""

    pixels: int
    seconds: float


class _Chunk:
    """An mtmd chunk this process owns, freed when the last run holding it goes."""

    def __init__(self, pointer: Any) -> None:
        self.pointer = pointer

    def __del__(self) -> None:
        mtmd.mtmd_input_chunk_free(self.pointer)


class Projector:
    """The projector GGUF loaded beside its text model (in the engine's native thread)."""

    def __init__(self, path: str, model: Any, n_threads: int, exact: bool) -> None:
        # mtmd logs through a callback of its own: the same filter as llama.cpp's (errors only).
        mtmd.mtmd_log_set(llama_log_callback, ctypes.c_void_p(0))
        mtmd.mtmd_helper_log_set(llama_log_callback, ctypes.c_void_p(0))
        params = mtmd.mtmd_context_params_default()
        params.use_gpu = False
        params.n_threads = n_threads
        params.print_timings = False
        params.warmup = False
        self._marker = MARKER.encode()  # kept: llama.cpp copies it, but only at init
        params.media_marker = self._marker
        if exact:  # LLM_BATCH_INVARIANT: the same attention kernels as the text model's
            params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        self.ctx = mtmd.mtmd_init_from_file(path.encode(), model, params)
        self._width = int(llama_cpp.llama_model_n_embd_inp(model))  # an embedding row, as the model reads it
        if not self.ctx:
            raise ValueError(f"projector {path}: llama.cpp's mtmd could not load it for this model")
        if mtmd.mtmd_decode_use_mrope(self.ctx):
            self.close()
            raise ValueError(f"projector {path}: M-RoPE projectors (Qwen2-VL and kin) are not supported yet")
        audio = bool(mtmd.mtmd_support_audio(self.ctx))
        rate = int(mtmd.mtmd_get_audio_sample_rate(self.ctx)) if audio else None
        self.capabilities = Capabilities(bool(mtmd.mtmd_support_vision(self.ctx)), audio, rate)
        self._pool: ThreadPool | None = None

    def close(self) -> None:
        if self.ctx:
            mtmd.mtmd_free(self.ctx)
            self.ctx = None

    def stop_thread(self) -> None:
        """End the thread that works out prompts with media (on the hub, whose pool it is: the
        engine's native thread, which frees the projector, cannot)."""
        if self._pool is not None:
            self._pool.kill()
            self._pool = None

    def prompt(
        self, text: str, media: list[tuple[str, bytes]], limits: MediaLimits
    ) -> tuple[list[int], tuple[MediaRun, ...]]:
        """`text` (MARKER where each medium goes; a chat prompt as Tokenizer.chat_text gives it) as tokens
        and media runs, each medium ("image" or "audio", its bytes) decoded within `limits`; worked out
        in a native thread: decoding and mtmd's tokenizing never run on the hub."""
        if self._pool is None:
            self._pool = ThreadPool(1)
        # An exception raised in a pool's thread is printed there as a traceback: it comes back as a value.
        outcome: tuple[list[int], tuple[MediaRun, ...]] | PromptRejectedError = self._pool.apply(
            self._tokenize_or_refuse, (text, media, limits)
        )
        if isinstance(outcome, PromptRejectedError):
            raise outcome
        return outcome

    def _tokenize_or_refuse(
        self, text: str, media: list[tuple[str, bytes]], limits: MediaLimits
    ) -> tuple[list[int], tuple[MediaRun, ...]] | PromptRejectedError:
        try:
            return self._tokenize(text, media, limits)
        except PromptRejectedError as refused:
            return refused

    def _bitmap(self, kind: str, data: bytes, limits: MediaLimits) -> Any:
        """An mtmd bitmap of the medium's pixels or samples, decoded here (decoding.py), never by mtmd."""
        if kind == "image":
            width, height, rgb = decoding.pixels(data, limits.pixels)
            return mtmd.mtmd_bitmap_init(width, height, (ctypes.c_uint8 * len(rgb)).from_buffer_copy(rgb))
        rate = self.capabilities.audio_sample_rate
        if rate is None:
            raise decoding.MediaDecodeError("is audio, which this projector does not hear")
        pcm = decoding.samples(data, rate, limits.seconds)
        return mtmd.mtmd_bitmap_init_from_audio(len(pcm), pcm.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))

    def _tokenize(
        self, text: str, media: list[tuple[str, bytes]], limits: MediaLimits
    ) -> tuple[list[int], tuple[MediaRun, ...]]:
        bitmaps: list[Any] = []
        chunks = mtmd.mtmd_input_chunks_init()
        try:
            for number, (kind, data) in enumerate(media):
                try:
                    bitmap = self._bitmap(kind, data, limits)
                except decoding.MediaDecodeError as refused:
                    raise PromptRejectedError(f"media item {number}: {refused}") from None
                if not bitmap:
                    raise PromptRejectedError(f"media item {number}: llama.cpp could not take its {kind}")
                bitmaps.append(bitmap)
                mtmd.mtmd_bitmap_set_id(bitmap, hashlib.sha256(data).hexdigest().encode())
            encoded = text.encode()
            given = mtmd.mtmd_input_text(encoded, len(encoded), True, True)  # as Tokenizer.chat_tokens
            array = (mtmd.mtmd_bitmap_p_ctypes * len(bitmaps))(*bitmaps)
            code = mtmd.mtmd_tokenize(self.ctx, chunks, ctypes.byref(given), array, len(bitmaps))
            if code != 0:
                why = (
                    "the media do not match their places in the prompt"
                    if code == 1
                    else "the projector cannot take this medium"
                )
                raise PromptRejectedError(f"The multimodal prompt was refused: {why}")
            return _cut(chunks)
        finally:
            for bitmap in bitmaps:
                mtmd.mtmd_bitmap_free(bitmap)
            mtmd.mtmd_input_chunks_free(chunks)

    def encode(self, run: MediaRun) -> np.ndarray | None:
        """The run's embeddings, one row per position (the encoder's thread: the projector's own
        graph, apart from the text model's context); None if llama.cpp could not encode it."""
        if mtmd.mtmd_encode_chunk(self.ctx, run.chunk.pointer) != 0:
            return None
        output = mtmd.mtmd_get_output_embd(self.ctx)
        return np.ctypeslib.as_array(output, shape=(run.length * self._width,)).copy()

    def decode(
        self, context: Any, run: MediaRun, embeddings: np.ndarray, seq_id: int, first: int, n_batch: int
    ) -> int:
        """Decode a run's embeddings into `seq_id`'s cells from position `first` (the batcher's thread);
        llama_decode's code (0: done, 1: no room in the KV cache)."""
        after = llama_cpp.llama_pos(0)
        rows = embeddings.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        code = mtmd.mtmd_helper_decode_image_chunk(
            self.ctx,
            context,
            run.chunk.pointer,
            rows,
            first,
            seq_id,
            n_batch,
            ctypes.byref(after),
            _NO_CALLBACK,
            None,
        )
        return int(code)


def _cut(chunks: Any) -> tuple[list[int], tuple[MediaRun, ...]]:
    """The chunks' tokens, a placeholder per media position, and the runs (each chunk copied out).
    A long audio clip comes as several chunks of one medium: each gets a placeholder of its own."""
    tokens: list[int] = []
    runs: list[MediaRun] = []
    seen: dict[bytes, int] = {}
    for index in range(mtmd.mtmd_input_chunks_size(chunks)):
        chunk = mtmd.mtmd_input_chunks_get(chunks, index)
        kind = mtmd.mtmd_input_chunk_get_type(chunk)
        if kind == mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
            count = ctypes.c_size_t(0)
            pointer = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(count))
            tokens.extend(pointer[n] for n in range(count.value))
            continue
        length = int(mtmd.mtmd_input_chunk_get_n_tokens(chunk))
        medium = mtmd.mtmd_input_chunk_get_id(chunk) or b""  # the content hash set on its bitmap
        seen[medium] = seen.get(medium, -1) + 1
        mark = placeholder(b"%s:%d" % (medium, seen[medium]))
        runs.append(
            MediaRun(len(tokens), length, _KINDS[kind], mark, _Chunk(mtmd.mtmd_input_chunk_copy(chunk)))
        )
        tokens.extend([mark] * length)
    return tokens, tuple(runs)
