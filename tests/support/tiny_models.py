"""Tiny random-weight GGUFs of the memory types no small real model on PyPI has: recurrent, hybrid, MoE.

llama.cpp's own CI tests every architecture on random weights (tests/test-llama-archs.cpp
in the pinned sdist); these are written the same way, with its gguf package, from the
tensor names and shapes `src/models/<arch>.cpp` loads. Each borrows SmolLM2's vocabulary,
merges and chat template, so the server tokenizes, templates and detokenizes them like a
real model. Random weights answer nonsense; every check on them compares the server with
itself (an optimisation on and off) or with llama-server on the same file.

Files are made once per machine into ~/.cache/llm-server/test-models (a few seconds each),
named by their kind and VERSION, so a change to a recipe makes new files.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter

from app.settings.values import default_model_path
from harness.files import machine_cache, made_once

VERSION = 1
CACHE = machine_cache("test-models")
EMBD, FF, CONTEXT = 64, 128, 4096
SWA = 32  # a window short enough that a test's prompts and answers cross it many times


@functools.cache
def _vocabulary() -> dict[str, object]:
    """SmolLM2's tokenizer fields (about 5 s to read: its 49,152 tokens and merges)."""
    reader = GGUFReader(default_model_path())
    fields: dict[str, object] = {}
    for name, field in reader.fields.items():
        if not name.startswith("tokenizer."):
            continue
        if field.types[0] == GGUFValueType.ARRAY:
            if field.types[1] == GGUFValueType.STRING:
                fields[name] = [bytes(field.parts[i]).decode() for i in field.data]
            else:
                fields[name] = [int(field.parts[i][0]) for i in field.data]
        elif field.types[0] == GGUFValueType.STRING:
            fields[name] = bytes(field.parts[field.data[0]]).decode()
        else:
            fields[name] = field.parts[field.data[0]][0].item()
    return fields


class _Model:
    """A GGUFWriter with SmolLM2's vocabulary and seeded random tensors (numpy shapes: ggml's reversed)."""

    def __init__(
        self,
        path: Path,
        arch: str,
        layers: int,
        seed: int,
        context: int = CONTEXT,
        tokens: tuple[list[bytes], list[int]] | None = None,
    ) -> None:
        self.writer = GGUFWriter(str(path), arch)
        self.rng = np.random.default_rng(seed)
        vocab = _vocabulary()
        token_list, token_types = tokens or (
            vocab["tokenizer.ggml.tokens"],
            vocab["tokenizer.ggml.token_type"],
        )
        self.n_vocab = len(token_list)  # type: ignore[arg-type]  # a GGUF value, read as object
        w = self.writer
        w.add_name(f"tiny-{arch}")
        w.add_context_length(context)
        w.add_embedding_length(EMBD)
        w.add_block_count(layers)
        w.add_layer_norm_rms_eps(1e-5)
        w.add_file_type(1)  # mostly F16
        w.add_vocab_size(self.n_vocab)
        w.add_tokenizer_model(str(vocab["tokenizer.ggml.model"]))
        w.add_tokenizer_pre(str(vocab["tokenizer.ggml.pre"]))
        w.add_token_list(token_list)  # type: ignore[arg-type]  # a GGUF value, read as object
        w.add_token_types(token_types)  # type: ignore[arg-type]  # a GGUF value, read as object
        w.add_token_merges(vocab["tokenizer.ggml.merges"])  # type: ignore[arg-type]  # a GGUF value, read as object
        w.add_bos_token_id(int(vocab["tokenizer.ggml.bos_token_id"]))  # type: ignore[call-overload]  # a GGUF value, read as object
        w.add_eos_token_id(int(vocab["tokenizer.ggml.eos_token_id"]))  # type: ignore[call-overload]  # a GGUF value, read as object
        w.add_add_bos_token(bool(vocab["tokenizer.ggml.add_bos_token"]))
        w.add_chat_template(str(vocab["tokenizer.chat_template"]))

    def tensor(self, name: str, *shape: int, scale: float = 0.1, f16: bool = False) -> None:
        values = self.rng.standard_normal(shape) * scale
        self.writer.add_tensor(name, values.astype(np.float16 if f16 else np.float32))

    def ones(self, name: str, *shape: int) -> None:
        self.writer.add_tensor(name, np.ones(shape, dtype=np.float32))

    def embeddings(self, tied: bool = True) -> None:
        # Large output weights: clear winners at temperature 0, as a trained model has.
        self.tensor("token_embd.weight", self.n_vocab, EMBD, scale=0.5, f16=True)
        if not tied:
            self.tensor("output.weight", self.n_vocab, EMBD, scale=0.5, f16=True)

    def attention(self, block: str, heads: int, kv_heads: int, head: int, norms: bool = False) -> None:
        # Sharp attention and strong values: the answer depends on which earlier tokens are
        # seen, so a cache that lost or kept the wrong ones shows in the text.
        self.tensor(f"{block}.attn_q.weight", heads * head, EMBD, scale=0.4)
        self.tensor(f"{block}.attn_k.weight", kv_heads * head, EMBD, scale=0.4)
        self.tensor(f"{block}.attn_v.weight", kv_heads * head, EMBD, scale=0.3)
        self.tensor(f"{block}.attn_output.weight", EMBD, heads * head, scale=0.3)
        if norms:
            self.ones(f"{block}.attn_q_norm.weight", head)
            self.ones(f"{block}.attn_k_norm.weight", head)

    def dense_ffn(self, block: str) -> None:
        self.ones(f"{block}.ffn_norm.weight", EMBD)
        self.tensor(f"{block}.ffn_gate.weight", FF, EMBD)
        self.tensor(f"{block}.ffn_up.weight", FF, EMBD)
        self.tensor(f"{block}.ffn_down.weight", EMBD, FF)

    def experts(self, block: str, experts: int, ff: int, biases: bool = False) -> None:
        self.tensor(f"{block}.ffn_gate_inp.weight", experts, EMBD, scale=0.5)
        for part in ("gate", "up"):
            self.tensor(f"{block}.ffn_{part}_exps.weight", experts, ff, EMBD, scale=0.3)
        self.tensor(f"{block}.ffn_down_exps.weight", experts, EMBD, ff, scale=0.3)
        if biases:
            self.tensor(f"{block}.ffn_gate_inp.bias", experts, scale=0.02)
            for part in ("gate", "up"):
                self.tensor(f"{block}.ffn_{part}_exps.bias", experts, ff, scale=0.02)
            self.tensor(f"{block}.ffn_down_exps.bias", experts, EMBD, scale=0.02)

    def write(self) -> None:
        self.writer.write_header_to_file()
        self.writer.write_kv_data_to_file()
        self.writer.write_tensors_to_file()
        self.writer.close()


def _mamba2(path: Path) -> None:
    """Mamba 2 (recurrent): every layer a state-space block, no attention, no KV cache."""
    layers, inner, state, groups, heads, conv = 2, 128, 16, 1, 4, 4
    m = _Model(path, "mamba2", layers, seed=21)
    w = m.writer
    w.add_ssm_conv_kernel(conv)
    w.add_ssm_inner_size(inner)
    w.add_ssm_state_size(state)
    w.add_ssm_time_step_rank(heads)
    w.add_ssm_group_count(groups)
    m.embeddings()
    m.ones("output_norm.weight", EMBD)
    conv_dim = inner + 2 * groups * state
    for layer in range(layers):
        block = f"blk.{layer}"
        m.ones(f"{block}.attn_norm.weight", EMBD)
        m.tensor(f"{block}.ssm_in.weight", inner + conv_dim + heads, EMBD, scale=0.3)
        m.tensor(f"{block}.ssm_conv1d.weight", conv_dim, conv, scale=0.5)
        m.tensor(f"{block}.ssm_conv1d.bias", conv_dim, scale=0.02)
        w.add_tensor(f"{block}.ssm_dt.bias", np.full(heads, -2.0, dtype=np.float32))
        # A must be negative (the state decays); small, so the state remembers far back.
        decay = -np.exp(m.rng.uniform(np.log(0.01), np.log(0.2), (heads, 1)))
        w.add_tensor(f"{block}.ssm_a", decay.astype(np.float32))
        m.ones(f"{block}.ssm_d", heads, 1)
        m.ones(f"{block}.ssm_norm.weight", groups, inner // groups)
        m.tensor(f"{block}.ssm_out.weight", EMBD, inner, scale=0.3)
    m.write()


def _lfm2(path: Path, window: int = 0) -> None:
    """LFM2 (hybrid): short-convolution layers (a recurrent state) between attention layers;
    with `window`, those attention layers slide too (recurrent + SWA in one memory)."""
    kinds = ("conv", "attention", "conv", "attention")
    heads, head = 2, EMBD // 2
    m = _Model(path, "lfm2", len(kinds), seed=22 + window)
    w = m.writer
    w.add_feed_forward_length(FF)
    w.add_head_count(heads)  # as LFM2's converter writes it: KV heads per layer, 0 for a convolution
    w.add_head_count_kv([heads if kind == "attention" else 0 for kind in kinds])
    w.add_rope_freq_base(10000.0)
    w.add_uint32("lfm2.shortconv.l_cache", 3)
    if window:
        w.add_sliding_window(window)
    m.embeddings()
    m.ones("token_embd_norm.weight", EMBD)  # LFM2's output norm goes by this name
    for layer, kind in enumerate(kinds):
        block = f"blk.{layer}"
        m.ones(f"{block}.attn_norm.weight", EMBD)
        m.dense_ffn(block)
        if kind == "attention":
            m.attention(block, heads, heads, head, norms=True)
        else:
            m.tensor(f"{block}.shortconv.conv.weight", EMBD, 3, scale=0.5)
            m.tensor(f"{block}.shortconv.in_proj.weight", 3 * EMBD, EMBD)
            m.tensor(f"{block}.shortconv.out_proj.weight", EMBD, EMBD)
    m.write()


def _experts_header(w: GGUFWriter, heads: int, kv_heads: int, head: int, experts: int) -> None:
    """The attention and mixture-of-experts sizes Qwen3-MoE and GPT-OSS both read (2 experts used)."""
    w.add_feed_forward_length(FF)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_key_length(head)
    w.add_value_length(head)
    w.add_rope_freq_base(10000.0)
    w.add_expert_count(experts)
    w.add_expert_used_count(2)
    w.add_expert_feed_forward_length(FF // 2)


def _qwen3moe(path: Path) -> None:
    """Qwen3-MoE (mixture of experts): plain KV attention, 4 experts per layer, 2 chosen per token."""
    layers, heads, kv_heads, head, experts = 2, 4, 2, 16, 4
    m = _Model(path, "qwen3moe", layers, seed=23)
    _experts_header(m.writer, heads, kv_heads, head, experts)
    m.embeddings()
    m.ones("output_norm.weight", EMBD)
    for layer in range(layers):
        block = f"blk.{layer}"
        m.ones(f"{block}.attn_norm.weight", EMBD)
        m.attention(block, heads, kv_heads, head, norms=True)
        m.ones(f"{block}.ffn_norm.weight", EMBD)
        m.experts(block, experts, FF // 2)
    m.write()


def _gpt_oss(path: Path) -> None:
    """GPT-OSS: sliding-window layers (every other one) and mixture of experts with attention sinks."""
    layers, heads, kv_heads, head, experts = 2, 4, 2, 16, 4
    m = _Model(path, "gpt-oss", layers, seed=24)
    _experts_header(m.writer, heads, kv_heads, head, experts)
    m.writer.add_rope_dimension_count(head)
    m.writer.add_sliding_window(SWA)
    m.embeddings(tied=False)
    m.ones("output_norm.weight", EMBD)
    for layer in range(layers):
        block = f"blk.{layer}"
        m.ones(f"{block}.attn_norm.weight", EMBD)
        m.ones(f"{block}.post_attention_norm.weight", EMBD)
        m.attention(block, heads, kv_heads, head)
        m.tensor(f"{block}.attn_output.bias", EMBD, scale=0.02)
        m.tensor(f"{block}.attn_sinks.weight", heads, scale=0.5)
        m.experts(block, experts, FF // 2, biases=True)
    m.write()


def _last_token_decides(m: _Model, embeddings: np.ndarray, output: np.ndarray) -> None:
    """Write `m` as a one-layer llama whose layer adds nothing (zero output projections), so that
    the last token alone decides the next: `embeddings` send each token to a direction, the
    untied `output` rows each direction to the next token."""
    w = m.writer
    heads, head = 2, EMBD // 2
    w.add_feed_forward_length(FF)
    w.add_head_count(heads)
    w.add_head_count_kv(heads)
    w.add_rope_dimension_count(head)
    w.add_rope_freq_base(10000.0)
    w.add_tensor("token_embd.weight", embeddings)
    w.add_tensor("output.weight", output)
    m.ones("output_norm.weight", EMBD)
    m.ones("blk.0.attn_norm.weight", EMBD)
    for part in ("q", "k", "v"):
        m.tensor(f"blk.0.attn_{part}.weight", heads * head, EMBD)
    w.add_tensor("blk.0.attn_output.weight", np.zeros((EMBD, heads * head), dtype=np.float32))
    m.ones("blk.0.ffn_norm.weight", EMBD)
    m.tensor("blk.0.ffn_gate.weight", FF, EMBD)
    m.tensor("blk.0.ffn_up.weight", FF, EMBD)
    w.add_tensor("blk.0.ffn_down.weight", np.zeros((EMBD, FF), dtype=np.float32))
    m.write()


def _greeter(path: Path) -> None:
    """A model that answers every prompt with "Hello" and stops, in a 32k window: for tests of what
    clients send and read (coding agents' long prompts, turn after turn), not of what a model says.

    Its one layer adds nothing (zero output projections), so the last token alone decides the
    next, through untied output rows: after any token "Hello", after "Hello" the end of text.
    """
    m = _Model(path, "llama", 1, seed=25, context=GREETER_CONTEXT)
    vocab = _vocabulary()
    hello = vocab["tokenizer.ggml.tokens"].index("Hello")  # type: ignore[attr-defined]  # a GGUF value, read as object
    end = int(vocab["tokenizer.ggml.eos_token_id"])  # type: ignore[call-overload]  # a GGUF value, read as object
    embeddings = np.zeros((m.n_vocab, EMBD), dtype=np.float16)
    embeddings[:, 0] = 1.0
    embeddings[hello] = 0.0
    embeddings[hello, 1] = 1.0
    output = np.zeros((m.n_vocab, EMBD), dtype=np.float16)
    output[hello, 0] = output[end, 1] = 10.0
    _last_token_decides(m, embeddings, output)


GREETER_CONTEXT = 32768


def _byte_level(raw: bytes) -> str:
    """`raw` as a byte-level BPE vocabulary (GPT-2's, SmolLM2's) spells it: each byte one character."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    spelled = {byte: chr(byte) for byte in kept}
    spelled.update({byte: chr(256 + n) for n, byte in enumerate(b for b in range(256) if b not in spelled)})
    return "".join(spelled[byte] for byte in raw)


# Tokens no tokenizer would make but a GGUF may hold, each with llama.cpp's own piece for it.
ODD_TOKENS: list[bytes | str] = [
    b"\xff\xferaw",  # not UTF-8 in the file itself
    b"",  # empty: llama.cpp names it [EMPTY_<id>]
    "x" * 100_000,  # far longer than any piece buffer
    "€",  # a character byte-level BPE cannot spell: llama.cpp writes [UNK_BYTE_0x…]
    "\x1b[31m",  # a terminal escape
    _byte_level(b"\xed\xa0\x80"),  # a UTF-16 surrogate in UTF-8: not valid UTF-8 once decoded
    _byte_level(b"\xc0\xaf"),  # an overlong encoding
    _byte_level(b"end\xf0\x9f\x98"),  # an emoji cut between two tokens...
    _byte_level(b"\x80ok"),  # ...and ended by the next
    _byte_level(b'"}</tool_call>\n'),  # markup, as a normal token
]
ODD_CONTROL = "<|odd|>"  # and a control token, which llama.cpp writes out only in /detokenize


def _odd_vocabulary(path: Path, twice: bool = False) -> None:
    """SmolLM2's vocabulary with ODD_TOKENS and ODD_CONTROL after it, answering every prompt with those
    tokens in that order (the control one after the markup) and then the end of text, as the
    greeter answers: for what the server makes of tokens no real tokenizer writes. `twice`: and
    one token more, "Hello" again, which llama.cpp asserts against (the whole process aborts)."""
    vocab = _vocabulary()
    base = [token.encode() for token in vocab["tokenizer.ggml.tokens"]]  # type: ignore[attr-defined]  # a GGUF value, read as object
    extra = [
        t if isinstance(t, bytes) else t.encode()
        for t in [*ODD_TOKENS, ODD_CONTROL, *(["Hello"] if twice else [])]
    ]
    types = [*vocab["tokenizer.ggml.token_type"], *[1] * len(ODD_TOKENS), 3, *([1] if twice else [])]  # type: ignore[misc]  # a GGUF value, read as object
    m = _Model(path, "llama", 1, seed=26, context=2048, tokens=(base + extra, types))
    chain = list(range(len(base), len(base) + len(extra)))
    end = int(vocab["tokenizer.ggml.eos_token_id"])  # type: ignore[call-overload]  # a GGUF value, read as object
    # Each token of the chain (dimension n + 1) leads to the next; every other (dimension 0) to the first.
    embeddings = np.zeros((m.n_vocab, EMBD), dtype=np.float16)
    embeddings[:, 0] = 1.0
    output = np.zeros((m.n_vocab, EMBD), dtype=np.float16)
    output[chain[0], 0] = 10.0
    for n, token in enumerate(chain):
        embeddings[token] = 0.0
        embeddings[token, n + 1] = 1.0
        output[chain[n + 1] if n + 1 < len(chain) else end, n + 1] = 10.0
    _last_token_decides(m, embeddings, output)


RECIPES: dict[str, Callable[[Path], None]] = {
    "mamba2": _mamba2,  # recurrent
    "lfm2": _lfm2,  # hybrid: recurrent + attention
    "lfm2-swa": functools.partial(_lfm2, window=SWA),  # hybrid with sliding-window attention
    "qwen3moe": _qwen3moe,  # mixture of experts
    "gpt-oss": _gpt_oss,  # sliding window + mixture of experts
    "greeter": _greeter,  # says "Hello" and stops, in a 32k window (the coding agents' tests)
    "odd-vocabulary": _odd_vocabulary,  # answers with tokens no tokenizer makes (the security matrix)
    "token-twice": functools.partial(_odd_vocabulary, twice=True),  # one token twice: llama.cpp would abort
}


def path(kind: str) -> Path:
    """The model of `kind` (a key of RECIPES), written on first use."""
    target = CACHE / f"tiny-{kind}-v{VERSION}.gguf"
    return made_once(target, RECIPES[kind])


if __name__ == "__main__":  # make test-models writes them all, outside any timed test
    for name in RECIPES:
        print(path(name))
    # And the LoRA adapters the tests load on them and on the real models (Mamba 2 has no
    # attention weights for one): SmolLM2's two for test_lora, one for every other model.
    from harness import real_models, tiny_audio_projector, tiny_lora, tiny_projector

    bases = [default_model_path(), str(real_models.gemma3_path())]
    bases += [str(path(name)) for name in RECIPES if name not in ("mamba2", "odd-vocabulary", "token-twice")]
    for base in bases:
        print(tiny_lora.cached(base))
    print(tiny_lora.cached(default_model_path(), seed=1))
    # A vision projector for each real text model, and llama.cpp's test media (harness/tiny_projector.py).
    for base in (default_model_path(), str(real_models.gemma3_path())):
        print(tiny_projector.cached(base))
    print(*(tiny_projector.media(name) for name in tiny_projector.MEDIA))
    print(tiny_audio_projector.cached(default_model_path()))  # and an audio one for SmolLM2
