"""Turn chat messages and text prompts into tokens with the model's own vocabulary and chat template."""

from __future__ import annotations

import ctypes
import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import jinja2
import llama_cpp
from llama_cpp import _internals as internals
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from app.engine import off_hub, template_limits
from app.engine.errors import GrammarError, PromptRejectedError
from app.engine.multimodal.projector import Projector
from app.engine.sampling.grammar import check_gbnf

# ChatML, for a model whose GGUF carries no chat template.
FALLBACK_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class Tokenizer:
    """The model's vocabulary and chat template, used by the views while the model generates.

    llama.cpp's vocabulary is read-only once loaded, so tokenizing in another native thread
    while the engine's decodes is safe: llama.cpp's own server tokenizes in its HTTP threads
    the same way. So a context-length error is an ordinary 400 even while the model is busy
    with other requests. Tokenizing and checking a grammar run off the hub (off_hub.py);
    a generated token's piece is read once and kept.
    """

    def __init__(self, model: internals.LlamaModel, chat_template: str | None = None) -> None:
        self._model = model
        self._vocab = model.vocab
        self.vocabulary_size = model.n_vocab()
        self.chat_template = (
            chat_template or model.metadata().get("tokenizer.chat_template") or FALLBACK_TEMPLATE
        )
        self._bos = model.token_bos()
        self.bos_text, self.eos_text = self._text_of(self._bos), self._text_of(model.token_eos())
        self._formatter = template_limits.BoundedFormatter(self.chat_template, self.eos_text, self.bos_text)
        # For a request that asks for no generation prompt (add_generation_prompt: false).
        self._closed_formatter = template_limits.BoundedFormatter(
            self.chat_template, self.eos_text, self.bos_text, add_generation_prompt=False
        )
        _probe(self._formatter)
        self._adds_bos = model.add_bos_token() and self._bos >= 0
        self.adds_bos = bool(model.add_bos_token())  # as llama-server counts n_keep
        self.fim = {
            "pre": llama_cpp.llama_vocab_fim_pre(self._vocab),
            "suf": llama_cpp.llama_vocab_fim_suf(self._vocab),
            "mid": llama_cpp.llama_vocab_fim_mid(self._vocab),
        }
        # Repo-level fill-in-the-middle (llama-server's /infill), where the vocabulary has them.
        self.fim_repo = {
            "rep": llama_cpp.llama_vocab_fim_rep(self._vocab),
            "sep": llama_cpp.llama_vocab_fim_sep(self._vocab),
        }
        # The model's multimodal projector, if it has one (set once loaded: it needs the context's model).
        self.projector: Projector | None = None
        # Both are asked once per generated token: a dictionary beats a foreign call.
        self._pieces: dict[int, bytes] = {}
        self._spelt: dict[int, bytes] = {}  # pieces as the prompt spells them (special tokens too)
        self._end_of_generation: dict[int, bool] = {}
        self._grammar_verdicts: OrderedDict[bytes, str | None] = OrderedDict()

    def _text_of(self, token: int) -> str:
        if token < 0:
            return ""
        return self._model.detokenize([token], special=True).decode("utf-8", errors="replace")

    def check_grammar(self, gbnf: str) -> None:
        """Refuse (GrammarError, saying why) a grammar llama.cpp cannot build over this vocabulary or
        one past the server's bounds. The last verdicts are kept: agents send the same tools each turn."""
        key = hashlib.sha256(gbnf.encode("utf-8", "surrogatepass")).digest()
        if key not in self._grammar_verdicts:
            try:
                off_hub.run(check_gbnf, self._vocab, gbnf, self._one_token)
                self._grammar_verdicts[key] = None
            except GrammarError as refused:
                self._grammar_verdicts[key] = refused.message
            if len(self._grammar_verdicts) > 256:
                self._grammar_verdicts.popitem(last=False)
        self._grammar_verdicts.move_to_end(key)
        if (why := self._grammar_verdicts[key]) is not None:
            raise GrammarError(why)

    def _one_token(self, piece: str) -> int | None:
        """The token a grammar's `<piece>` names, if the text is exactly one (as llama.cpp's parser asks)."""
        tokens = self._encode(piece, add_special=False, parse_special=True)
        return tokens[0] if len(tokens) == 1 else None

    def is_end_of_generation(self, token: int) -> bool:
        """True for end-of-turn / end-of-text tokens."""
        known = self._end_of_generation.get(token)
        if known is None:
            known = self._end_of_generation[token] = bool(llama_cpp.llama_vocab_is_eog(self._vocab, token))
        return known

    def piece(self, token: int) -> bytes:
        """The bytes one generated token stands for (special tokens render as nothing)."""
        known = self._pieces.get(token)
        if known is None:
            known = self._pieces[token] = self._piece(token, special=False)
        return known

    def pieces(self, tokens: Sequence[int]) -> list[bytes]:
        """Each token's `piece`, those not read before read off the hub (a client's long text)."""
        if any(token not in self._pieces for token in tokens):
            return off_hub.run(lambda: [self.piece(token) for token in tokens])
        return [self._pieces[token] for token in tokens]

    def spelt_within(self, prompt: str, tokens: list[int], prefix: str) -> int | None:
        """How many of `tokens` (`prompt`'s chat tokens) lie wholly within `prefix`, one of its beginnings,
        read off their pieces rather than tokenizing it again; None where the pieces do not spell the
        text (a space SentencePiece puts first, say): the caller tokenizes then."""
        if not prompt.startswith(prefix):
            return None
        text, end = self.chat_text(prompt).encode(), len(self.chat_text(prefix).encode())
        first = self._added(tokens)
        self._spell(tokens)
        spelt = 0
        for count, token in enumerate(tokens[first:], start=first):
            if token < 0:  # an image's placeholder, no token of the vocabulary: llama.cpp aborts on it
                return None
            piece = self._spelt_piece(token)
            if text[spelt : spelt + len(piece)] != piece:
                return None
            spelt += len(piece)
            if spelt > end:
                return count
        return len(tokens) if spelt == end else None

    def spelt_offset(self, prompt: str, tokens: Sequence[int], at: int) -> int | None:
        """Where token `at` of `tokens` (`prompt`'s chat tokens) begins in the prompt's chat text, in
        bytes, read off the pieces before it; None where they do not spell the text (an image's
        placeholders, a prompt cut to fit): the caller counts tokens then."""
        text = self.chat_text(prompt).encode()
        self._spell(tokens[:at])
        spelt = 0
        for token in tokens[self._added(tokens) : at]:
            piece = self._spelt_piece(token) if token >= 0 else None  # an image's placeholder
            if piece is None or text[spelt : spelt + len(piece)] != piece:
                return None
            spelt += len(piece)
        return spelt

    def _added(self, tokens: Sequence[int]) -> int:
        """1 if `tokens` open with the BOS the tokenizer added (which the chat text does not hold)."""
        return 1 if self._adds_bos and len(tokens) > 0 and tokens[0] == self._bos else 0

    def _spell(self, tokens: Sequence[int]) -> None:
        """Read the spelt pieces of `tokens` not read before, off the hub (an agent's first prompt)."""
        missing = {token for token in tokens if token >= 0 and token not in self._spelt}
        if missing:
            off_hub.run(lambda: [self._spelt_piece(token) for token in missing])

    def _spelt_piece(self, token: int) -> bytes:
        piece = self._spelt.get(token)
        if piece is None:
            piece = self._spelt[token] = self._piece(token, special=True)
        return piece

    def _piece(self, token: int, special: bool) -> bytes:
        buffer = ctypes.create_string_buffer(256)
        size = llama_cpp.llama_token_to_piece(self._vocab, token, buffer, len(buffer), 0, special)
        if size < 0:  # a longer token (a GGUF may hold any): llama.cpp said its size, as llama-server asks
            buffer = ctypes.create_string_buffer(-size)
            size = llama_cpp.llama_token_to_piece(self._vocab, token, buffer, len(buffer), 0, special)
        return buffer.raw[: max(size, 0)]

    def preserve(self, markers: tuple[str, ...]) -> list[str]:
        """Write these markers out when generated, though they are control tokens (which
        llama.cpp writes as nothing): a chat format's parser must see its markup. Returns
        those that are one control token of this vocabulary."""
        return off_hub.run(self._preserved, markers)

    def _preserved(self, markers: tuple[str, ...]) -> list[str]:
        preserved = []
        for marker in markers:
            tokens = self._encode(marker, add_special=False, parse_special=True)
            if len(tokens) == 1 and not self._piece(tokens[0], special=False):
                self._pieces[tokens[0]] = self._piece(tokens[0], special=True)
                preserved.append(marker)
        return preserved

    def tokenize(self, text: str, add_special: bool, parse_special: bool) -> list[int]:
        """Text to tokens: with the special tokens the model's metadata adds (BOS; [CLS] and [SEP] for
        BERT-like models) if `add_special`, control tokens in the text parsed if `parse_special`."""
        return self._encode(text, add_special, parse_special)

    def _encode(self, text: str, add_special: bool, parse_special: bool) -> list[int]:
        # llama-cpp-python's add_bos is llama.cpp's add_special: BOS, EOS and SEP as the GGUF says.
        try:
            encoded = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: no text (the API refuses it before; this holds)
            raise PromptRejectedError("the text holds a lone surrogate, which no tokenizer reads") from None
        tokens: list[int] = off_hub.run(self._model.tokenize, encoded, add_special, parse_special)
        return tokens

    def detokenize(self, tokens: list[int]) -> str:
        """Tokens to text, control tokens written out (what /detokenize and echoed token prompts show)."""
        text = off_hub.run(self._spelt_out, tokens)
        return text.decode("utf-8", errors="replace")

    def _spelt_out(self, tokens: list[int]) -> bytes:
        return b"".join(self._piece(token, special=True) for token in tokens)

    def vocabulary_strings(self, tokens: list[int]) -> list[str]:
        """Each token as the vocabulary stores it (a tokenizer's convert_ids_to_tokens)."""
        texts: list[bytes] = off_hub.run(self._stored_texts, tokens)
        return [text.decode("utf-8", errors="replace") for text in texts]

    def _stored_texts(self, tokens: list[int]) -> list[bytes]:
        return [llama_cpp.llama_vocab_get_text(self._vocab, token) for token in tokens]

    def in_vocabulary(self, tokens: list[int]) -> bool:
        return all(0 <= token < self.vocabulary_size for token in tokens)

    def chat(self, messages: list[dict[str, Any]]) -> list[int]:
        """Apply the model's chat template and tokenize, template markers included."""
        return self.chat_tokens(self.render(messages))

    def render(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        variables: dict[str, Any] | None = None,
        generation_prompt: bool = True,
    ) -> str:
        """The prompt text the chat template makes of `messages`, `tools` and any extra `variables`
        (chat_template_kwargs such as enable_thinking), with the assistant's turn opened or not."""
        formatter = self._formatter if generation_prompt else self._closed_formatter
        return render_chat(formatter, messages, tools, variables)

    def chat_tokens(self, prompt: str) -> list[int]:
        """A rendered chat prompt's tokens, its template markers read as the special tokens they are."""
        return self._encode(self.chat_text(prompt), add_special=True, parse_special=True)

    def chat_text(self, prompt: str) -> str:
        """A rendered chat prompt as it is tokenized with the model's special tokens added: as llama-server
        (common/chat.cpp), a BOS the template wrote is dropped, so a model that wants one gets it once
        whether its template writes it (Gemma's own) or not (ChatML in a Gemma GGUF)."""
        if self._adds_bos and self.bos_text and prompt.startswith(self.bos_text):
            return prompt[len(self.bos_text) :]
        return prompt

    def text(self, prompt: str) -> list[int]:
        """Tokenize a raw completion prompt as llama.cpp's server does (BOS, no special parsing)."""
        tokens = self._encode(prompt, add_special=False, parse_special=False)
        if self._adds_bos or not tokens:
            # An empty prompt still needs one token to generate from: the start of text.
            tokens = [self._bos if self._bos >= 0 else self._model.token_eos()] + tokens
        return tokens

    def parsed(self, prompt: str) -> list[int]:
        """Tokenize a prompt as llama-server's own /completion does: the special tokens the model adds
        (BOS), control tokens in the text parsed; an empty prompt is the start of text."""
        tokens = self._encode(prompt, add_special=True, parse_special=True)
        return tokens or [self._bos if self._bos >= 0 else self._model.token_eos()]

    def rerank_pair(self, query: str, document: str) -> list[int]:
        """A query and a document as a reranker reads them, as llama-server joins them: the model's
        own "rerank" template if it has one, else [BOS] query [EOS] [SEP] document [EOS], each
        special token where the model's metadata asks for it (BERT: [CLS] query [SEP] document)."""
        template = llama_cpp.llama_model_chat_template(self._model.model, b"rerank")
        if template:
            prompt = template.decode().replace("{query}", query).replace("{document}", document)
            return self._encode(prompt, add_special=False, parse_special=True)
        vocab = self._vocab
        eos = llama_cpp.llama_vocab_eos(vocab)
        eos = eos if eos >= 0 else llama_cpp.llama_vocab_sep(vocab)
        adds_eos = [eos] if llama_cpp.llama_vocab_get_add_eos(vocab) else []
        adds_sep = [llama_cpp.llama_vocab_sep(vocab)] if llama_cpp.llama_vocab_get_add_sep(vocab) else []
        adds_bos = [llama_cpp.llama_vocab_bos(vocab)] if llama_cpp.llama_vocab_get_add_bos(vocab) else []
        return (
            adds_bos
            + self._encode(query, add_special=False, parse_special=False)
            + adds_eos
            + adds_sep
            + self._encode(document, add_special=False, parse_special=False)
            + adds_eos
        )

    @property
    def added_bos(self) -> int | None:
        """The BOS token llama.cpp puts before a prompt it tokenizes with special tokens, if it does."""
        return self._bos if self._adds_bos else None

    @property
    def supports_infill(self) -> bool:
        """True when the vocabulary has fill-in-the-middle markers."""
        return all(token >= 0 for token in self.fim.values())

    def infill(self, prefix: str, suffix: str) -> list[int]:
        """Tokenize a fill-in-the-middle prompt: <pre>prefix<suf>suffix<mid>."""
        return (
            [self.fim["pre"]]
            + self._encode(prefix, add_special=False, parse_special=False)
            + [self.fim["suf"]]
            + self._encode(suffix, add_special=False, parse_special=False)
            + [self.fim["mid"]]
        )


def render_chat(
    formatter: Jinja2ChatFormatter,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    variables: dict[str, Any] | None,
) -> str:
    """The prompt `formatter` makes; a template that raises on these messages is the client's error."""
    # Plain dicts in the shapes llama-cpp-python's TypedDicts name, as the templates read them.
    conversation: list[Any] = [_template_message(m) for m in messages]
    described: Any = tools
    try:
        prompt: str = formatter(messages=conversation, tools=described, **(variables or {})).prompt
    except (jinja2.TemplateError, ValueError, TypeError, LookupError, AttributeError, RecursionError) as exc:
        # Templates index and call what the messages hold: a missing key or a wrong type is
        # the messages' fault, named in the message (raise_exception's own text, usually).
        raise PromptRejectedError(f"The model's chat template rejected these messages: {exc}") from None
    return prompt


def _probe(formatter: Jinja2ChatFormatter) -> None:
    """At load: a template that cannot render one short message within the bounds (it loops, or
    writes megabytes) cannot serve; one that refuses these messages may still take others."""
    try:
        formatter(messages=[{"role": "user", "content": "Hello."}])
    except template_limits.TemplateLimitError as exc:
        raise ValueError(f"its chat template cannot serve: {exc} on one short message") from None
    except (jinja2.TemplateError, ValueError, TypeError, LookupError, AttributeError, RecursionError):
        pass


def _template_message(message: dict[str, Any]) -> dict[str, Any]:
    """The message as chat templates expect it; `developer` is OpenAI's new name for `system`."""
    role = "system" if message["role"] == "developer" else message["role"]
    converted = {"role": role, "content": message.get("content") or ""}
    for key in ("name", "tool_calls", "tool_call_id", "reasoning_content"):
        if message.get(key):
            converted[key] = message[key]
    return converted
