"""The tiny vision projectors the multimodal tests stand on: llama.cpp's mtmd loads them and llama-server
serves them, on each real text model.

harness/tiny_projector.py writes a random-weight projector of llama.cpp's Gemma 3 type for SmolLM2 and
for Gemma 3 270M. Here the pinned bindings (`llama_cpp.mtmd_cpp`) load each beside its text model
and cut real images (llama.cpp's own test JPEG, a PNG made here) into text and image chunks, and
llama-server built from the same sdist answers chat requests with an image through it: the image's
tokens counted, the same image again served from its cache, another image not.
"""

from __future__ import annotations

import base64
import ctypes
import io
from collections.abc import Iterator
from typing import Any

import httpx
import llama_cpp
import pytest
from llama_cpp import mtmd_cpp
from PIL import Image

from app.settings.values import default_model_path
from harness import llama_server, tiny_projector
from harness.real_models import gemma3_path

TEXT_CHUNK, IMAGE_CHUNK = 0, 1  # mtmd_input_chunk_type


def bases() -> dict[str, str]:
    return {"smollm2": default_model_path(), "gemma3": str(gemma3_path())}


def png(colour: tuple[int, int, int], size: tuple[int, int] = (100, 50)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, format="PNG")
    return out.getvalue()


class Mtmd:
    """A text model and its projector loaded through the pinned bindings (one CPU thread)."""

    def __init__(self, base: str, projector: str) -> None:
        llama_cpp.llama_backend_init()
        self.model = llama_cpp.llama_model_load_from_file(
            base.encode(), llama_cpp.llama_model_default_params()
        )
        assert self.model, base
        params = mtmd_cpp.mtmd_context_params_default()
        params.use_gpu, params.n_threads, params.print_timings = False, 1, False
        self.ctx = mtmd_cpp.mtmd_init_from_file(projector.encode(), self.model, params)
        assert self.ctx, projector

    def bitmap(self, media: bytes) -> Any:
        """mtmd's bitmap of an image (or sound) file's bytes; None if it cannot decode them."""
        buffer = (ctypes.c_uint8 * len(media)).from_buffer_copy(media)
        return mtmd_cpp.mtmd_helper_bitmap_init_from_buf(self.ctx, buffer, len(media), False)

    def chunks(
        self, *media: bytes, prompt: str = "What is in this picture? {}"
    ) -> list[tuple[int, int]] | None:
        """(type, token count) of each chunk `prompt` becomes with one of `media` at each of its `{}`
        (mtmd's marker); None if mtmd refuses them."""
        bitmaps = [self.bitmap(item) for item in media]
        assert all(bitmaps), "mtmd could not decode a file"
        marker = mtmd_cpp.mtmd_default_marker().decode()
        text = prompt.format(*([marker] * len(media))).encode()
        request = mtmd_cpp.mtmd_input_text(text, len(text), True)
        chunks = mtmd_cpp.mtmd_input_chunks_init()
        try:
            array = (mtmd_cpp.mtmd_bitmap_p_ctypes * len(bitmaps))(*bitmaps)
            if mtmd_cpp.mtmd_tokenize(self.ctx, chunks, ctypes.byref(request), array, len(bitmaps)) != 0:
                return None
            found = []
            for index in range(mtmd_cpp.mtmd_input_chunks_size(chunks)):
                chunk = mtmd_cpp.mtmd_input_chunks_get(chunks, index)
                kind = mtmd_cpp.mtmd_input_chunk_get_type(chunk)
                found.append((kind, mtmd_cpp.mtmd_input_chunk_get_n_tokens(chunk)))
            return found
        finally:
            mtmd_cpp.mtmd_input_chunks_free(chunks)
            for bitmap in bitmaps:
                mtmd_cpp.mtmd_bitmap_free(bitmap)

    def close(self) -> None:
        mtmd_cpp.mtmd_free(self.ctx)
        llama_cpp.llama_model_free(self.model)


@pytest.fixture(scope="module", params=list(bases()))
def base(request: pytest.FixtureRequest) -> tuple[str, str]:
    """A real text model's path and its projector's."""
    path = bases()[request.param]
    return path, str(tiny_projector.cached(path))


@pytest.fixture(scope="module")
def mtmd(base: tuple[str, str]) -> Iterator[Mtmd]:
    loaded = Mtmd(*base)
    yield loaded
    loaded.close()


def test_mtmd_loads_the_projector_and_cuts_images_into_chunks(mtmd: Mtmd) -> None:
    assert mtmd_cpp.mtmd_support_vision(mtmd.ctx) and not mtmd_cpp.mtmd_support_audio(mtmd.ctx)
    jpeg = tiny_projector.media("test-1.jpeg").read_bytes()
    for media in (jpeg, png((200, 30, 30))):  # any size: mtmd resizes to the projector's 64 x 64
        chunks = mtmd.chunks(media)
        assert chunks is not None
        assert [kind for kind, _ in chunks] == [TEXT_CHUNK, IMAGE_CHUNK, TEXT_CHUNK], chunks
        assert chunks[1][1] == tiny_projector.IMAGE_TOKENS
    two = mtmd.chunks(jpeg, png((30, 30, 200)), prompt="Compare {} with {}.")
    assert two is not None and [kind for kind, _ in two] == [
        TEXT_CHUNK,
        IMAGE_CHUNK,
        TEXT_CHUNK,
        IMAGE_CHUNK,
        TEXT_CHUNK,
    ]
    # A vision-only projector refuses sound as it decodes it (for the server, a 400 to give, not a crash).
    assert mtmd.bitmap(tiny_projector.media("test-2.mp3").read_bytes()) is None


@pytest.fixture(scope="module")
def reference(base: tuple[str, str]) -> Iterator[Any]:
    path, projector = base
    service = llama_server.start(path, threads=1, slots=1, n_ctx=1024, extra=("--mmproj", projector))
    yield service
    service.stop()


def ask(url: str, media: bytes, mime: str) -> dict[str, Any]:
    image = f"data:{mime};base64,{base64.b64encode(media).decode()}"
    content = [
        {"type": "text", "text": "What is in this picture?"},
        {"type": "image_url", "image_url": {"url": image}},
    ]
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": 4, "temperature": 0}
    answer = httpx.post(url + "/v1/chat/completions", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()["usage"]


def test_llama_server_answers_about_an_image_through_the_projector(reference: Any) -> None:
    assert httpx.get(reference.url + "/props", timeout=10).json()["modalities"]["vision"] is True
    jpeg = tiny_projector.media("test-1.jpeg").read_bytes()
    first = ask(reference.url, jpeg, "image/jpeg")
    text_only = httpx.post(
        reference.url + "/apply-template",
        json={"messages": [{"role": "user", "content": "What is in this picture?"}]},
        timeout=10,
    ).json()["prompt"]
    tokens = httpx.post(reference.url + "/tokenize", json={"content": text_only}, timeout=10).json()["tokens"]
    # The image's tokens and the text around it (its begin and end markers among them).
    assert first["prompt_tokens"] > len(tokens) + tiny_projector.IMAGE_TOKENS - 1
    again = ask(reference.url, jpeg, "image/jpeg")["prompt_tokens_details"]["cached_tokens"]
    other = ask(reference.url, png((30, 30, 200)), "image/png")
    assert other["prompt_tokens"] == first["prompt_tokens"]  # every image is 64 x 64 to the projector
    # Another image: the cache serves the text before it at most. The same one: past its tokens too
    # (on Gemma's sliding window, from llama-server's checkpoint after the image).
    before = other["prompt_tokens_details"]["cached_tokens"]
    assert before < first["prompt_tokens"] - tiny_projector.IMAGE_TOKENS
    assert again >= before + tiny_projector.IMAGE_TOKENS, (again, before)
