"""A tiny random-weight vision projector (mmproj) for a text GGUF, and the test media of llama.cpp's sdist.

No small vision model ships on PyPI; llama.cpp's own CI tests its multimodal code on tiny
random-weight projectors for the same reason. This one is of llama.cpp's Gemma 3 type
(`tools/mtmd/models/siglip.cpp` in the pinned sdist: a SigLIP encoder, average pooling, an RMS norm
and a projection into the text model's embeddings), with the tensor names and hyper-parameters
`tools/mtmd/clip.cpp` loads (`clip-impl.h`'s TN_* and KEY_* names). Nothing in mtmd ties the Gemma 3
type to a Gemma text model: its output only has to be as wide as the text model's embeddings, so
each base (SmolLM2, Gemma 3 270M) gets one of its width. A 64-pixel image in 4-pixel patches, pooled
4 x 4, becomes 16 image tokens. The answers are nonsense; tests compare shapes, token counts, the
cache, and our answers with llama-server's on the same files.

`cached` makes each projector once per machine in ~/.cache/llm-server/test-models; `media` copies
the test media llama.cpp ships (`tools/mtmd/test-1.jpeg`, `test-2.mp3`) out of the pinned
llama-cpp-python sdist (pip's download, cached by pip) into the same folder.
"""

from __future__ import annotations

import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGUFReader, GGUFWriter

from harness import llama_server
from harness.files import machine_cache, made_once

VERSION = 1  # a change to the recipe makes new cached files
CACHE = machine_cache("test-models")


@dataclass(frozen=True)
class Shape:
    """A projector's size: image side, patch side, pooling, and its encoder's width and depth."""

    image: int
    patch: int
    merge: int
    embd: int
    ff: int  # != embd: clip.cpp swaps up and down when they are equal
    layers: int
    heads: int

    @property
    def image_tokens(self) -> int:
        return (self.image // self.patch // self.merge) ** 2


# The tests' projector: (64 / 4)^2 patches, pooled 4 x 4: 16 image tokens, made in a second.
TINY = Shape(64, 4, 4, 32, 64, 2, 2)
# The benchmark's: a ViT-B-sized encoder over 448 px (1,024 patches, 64 image tokens), so that
# encoding an image costs what a small real projector's does (f16 matrices, ~170 MB).
BENCH = Shape(448, 14, 4, 768, 3072, 12, 12)
IMAGE_TOKENS = TINY.image_tokens
MEDIA = ("test-1.jpeg", "test-2.mp3")


def text_width(base: str) -> int:
    """The text model's embedding width (`{arch}.embedding_length`), which the projector must output."""
    reader = GGUFReader(base)
    arch_field = reader.fields["general.architecture"]
    arch = bytes(arch_field.parts[arch_field.data[0]]).decode()
    field = reader.fields[f"{arch}.embedding_length"]
    return int(field.parts[field.data[0]][0])


def write(path: Path, base: str, seed: int = 0, shape: Shape = TINY) -> Path:
    """Write a Gemma 3 type projector for the text GGUF `base` to `path` and return the path."""
    rng = np.random.default_rng(seed)
    width = text_width(base)
    writer = GGUFWriter(str(path), "clip")
    IMAGE, PATCH, MERGE, EMBD, FF, LAYERS, HEADS = (  # noqa: N806 - the header's names
        shape.image, shape.patch, shape.merge, shape.embd, shape.ff, shape.layers, shape.heads
    )  # fmt: skip
    big = shape != TINY  # the benchmark's: its matrices in f16, as real projectors ship them

    def tensor(name: str, *dims: int, f16: bool = False) -> None:  # numpy's shapes: ggml's reversed
        values = rng.standard_normal(dims, dtype=np.float32 if big else np.float64) * 0.1
        matrix = big and len(dims) > 1 and "position" not in name  # a product's weights, not an addend
        writer.add_tensor(name, values.astype(np.float16 if f16 or matrix else np.float32))

    def ones(name: str) -> None:  # a norm's weight: random ones would only rescale the noise
        writer.add_tensor(name, np.ones(EMBD, np.float32))

    writer.add_name("tiny-gemma3-projector")
    writer.add_clip_has_vision_encoder(True)
    writer.add_clip_projector_type("gemma3")
    writer.add_vision_image_size(IMAGE)
    writer.add_vision_patch_size(PATCH)
    writer.add_vision_embedding_length(EMBD)
    writer.add_vision_feed_forward_length(FF)
    writer.add_vision_block_count(LAYERS)
    writer.add_vision_head_count(HEADS)
    writer.add_vision_attention_layernorm_eps(1e-6)
    writer.add_vision_projection_dim(width)
    writer.add_vision_image_mean([0.5, 0.5, 0.5])
    writer.add_vision_image_std([0.5, 0.5, 0.5])
    writer.add_vision_use_gelu(True)
    writer.add_vision_projector_scale_factor(MERGE)  # read by clip.cpp for Gemma 3 (tinygemma3's key)
    tensor("v.patch_embd.weight", EMBD, 3, PATCH, PATCH, f16=True)
    tensor("v.patch_embd.bias", EMBD)
    tensor("v.position_embd.weight", (IMAGE // PATCH) ** 2, EMBD)
    for layer in range(LAYERS):
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            tensor(f"v.blk.{layer}.{name}.weight", EMBD, EMBD)
            tensor(f"v.blk.{layer}.{name}.bias", EMBD)
        for name in ("ln1", "ln2"):
            ones(f"v.blk.{layer}.{name}.weight")
            tensor(f"v.blk.{layer}.{name}.bias", EMBD)
        tensor(f"v.blk.{layer}.ffn_up.weight", FF, EMBD)
        tensor(f"v.blk.{layer}.ffn_up.bias", FF)
        tensor(f"v.blk.{layer}.ffn_down.weight", EMBD, FF)
        tensor(f"v.blk.{layer}.ffn_down.bias", EMBD)
    ones("v.post_ln.weight")
    tensor("v.post_ln.bias", EMBD)
    tensor("mm.input_projection.weight", EMBD, width)  # transposed by the graph
    ones("mm.soft_emb_norm.weight")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def cached(base: str, seed: int = 0, shape: Shape = TINY) -> Path:
    """The projector `write` makes for `base`, made once per machine (atomically)."""
    source = Path(base)
    size = "" if shape == TINY else f"-{shape.image}px-{shape.layers}x{shape.embd}"
    target = CACHE / f"{source.stem}-{source.stat().st_size}-mmproj{size}-seed{seed}-v{VERSION}.gguf"
    return made_once(target, lambda partial: write(partial, base, seed, shape))


def media(name: str) -> Path:
    """One of llama.cpp's test media files (MEDIA), copied out of the pinned sdist on first use."""
    target = CACHE / name
    if target.exists():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as work:
        archive = llama_server.sdist(Path(work))
        top = archive.name.removesuffix(".tar.gz")  # llama_cpp_python-<version>
        with tarfile.open(archive) as sources:
            for wanted in MEDIA:
                member = sources.extractfile(f"{top}/vendor/llama.cpp/tools/mtmd/{wanted}")
                assert member is not None, wanted
                (Path(work) / wanted).write_bytes(member.read())
        for wanted in MEDIA:
            (Path(work) / wanted).replace(CACHE / wanted)
    return target
