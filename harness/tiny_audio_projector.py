"""A tiny random-weight audio projector (mmproj) for a text GGUF: llama.cpp's Qwen2-Audio type.

No small audio model ships on PyPI, so the tests hear through a projector made here, as
tiny_projector.py makes the vision one. mtmd's Qwen2-Audio type (`qwen2a`) is a Whisper
encoder (`tools/mtmd/models/whisper-enc.cpp` in the pinned sdist: two 1-D convolutions over
128 mel bins, transformer blocks, average pooling, a post norm) and one linear layer into the
text model's embeddings; tensor names and keys are those `tools/mtmd/clip.cpp` loads
(`clip-impl.h`'s TN_* and KEY_* names, `conversion/ultravox.py`'s layout). mtmd cuts audio
into 30-second windows of 3,000 mel frames (a shorter clip is padded to one), each 750
audio tokens after the convolutions' stride and the pooling. The answers are nonsense; tests
compare token counts, the cache, and our answers with llama-server's on the same files.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGUFWriter

from harness.files import made_once
from harness.tiny_projector import CACHE, text_width

VERSION = 1  # a change to the recipe makes new cached files
MEL_BINS = 128  # Qwen2-Audio's (Whisper large-v3's)
EMBD, FF, LAYERS, HEADS = 32, 64, 2, 2  # FF != EMBD: clip.cpp swaps up and down when they are equal
POSITIONS = 1500  # a window's 3,000 frames after the second convolution's stride of 2
AUDIO_TOKENS = 750  # per window, after the 2 x 2 average pooling
SAMPLE_RATE = 16000


def write(path: Path, base: str, seed: int = 0) -> Path:
    """Write a Qwen2-Audio type projector for the text GGUF `base` to `path` and return the path."""
    rng = np.random.default_rng(seed)
    width = text_width(base)
    writer = GGUFWriter(str(path), "clip")

    def tensor(name: str, *dims: int, f16: bool = False) -> None:  # numpy's shapes: ggml's reversed
        values = rng.standard_normal(dims) * 0.1
        writer.add_tensor(name, values.astype(np.float16 if f16 else np.float32))

    def ones(name: str) -> None:  # a norm's weight: random ones would only rescale the noise
        writer.add_tensor(name, np.ones(EMBD, np.float32))

    writer.add_name("tiny-qwen2-audio-projector")
    writer.add_bool("clip.has_audio_encoder", True)
    writer.add_string("clip.projector_type", "qwen2a")
    writer.add_uint32("clip.audio.embedding_length", EMBD)
    writer.add_uint32("clip.audio.feed_forward_length", FF)
    writer.add_uint32("clip.audio.block_count", LAYERS)
    writer.add_uint32("clip.audio.attention.head_count", HEADS)
    writer.add_uint32("clip.audio.projection_dim", width)
    writer.add_float32("clip.audio.attention.layer_norm_epsilon", 1e-5)
    writer.add_uint32("clip.audio.num_mel_bins", MEL_BINS)
    # The convolutions: kernels in f16 (as the converter forces them), biases one per channel.
    tensor("a.conv1d.1.weight", EMBD, MEL_BINS, 3, f16=True)
    tensor("a.conv1d.1.bias", EMBD, 1)
    tensor("a.conv1d.2.weight", EMBD, EMBD, 3, f16=True)
    tensor("a.conv1d.2.bias", EMBD, 1)
    tensor("a.position_embd.weight", POSITIONS, EMBD)
    for layer in range(LAYERS):
        for name in ("attn_q", "attn_v", "attn_out"):
            tensor(f"a.blk.{layer}.{name}.weight", EMBD, EMBD)
            tensor(f"a.blk.{layer}.{name}.bias", EMBD)
        tensor(f"a.blk.{layer}.attn_k.weight", EMBD, EMBD)  # Whisper's key has no bias
        for name in ("ln1", "ln2"):
            ones(f"a.blk.{layer}.{name}.weight")
            tensor(f"a.blk.{layer}.{name}.bias", EMBD)
        tensor(f"a.blk.{layer}.ffn_up.weight", FF, EMBD)
        tensor(f"a.blk.{layer}.ffn_up.bias", FF)
        tensor(f"a.blk.{layer}.ffn_down.weight", EMBD, FF)
        tensor(f"a.blk.{layer}.ffn_down.bias", EMBD)
    ones("a.post_ln.weight")
    tensor("a.post_ln.bias", EMBD)
    tensor("mm.a.fc.weight", width, EMBD)
    tensor("mm.a.fc.bias", width)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def cached(base: str, seed: int = 0) -> Path:
    """The projector `write` makes for `base`, made once per machine (atomically)."""
    source = Path(base)
    target = CACHE / f"{source.stem}-{source.stat().st_size}-mmproj-audio-seed{seed}-v{VERSION}.gguf"
    return made_once(target, lambda partial: write(partial, base, seed))
