"""A vocabulary llama.cpp would abort on is refused before llama.cpp reads it, read as llama.cpp reads it."""

from __future__ import annotations

from pathlib import Path

import pytest
from gguf import GGUFReader, GGUFWriter, PoolingType

from app.engine.gguf import gguf_metadata, vocabulary_check
from tests.support import tiny_bert


def test_the_tokens_read_are_those_of_the_gguf_package(tmp_path: Path) -> None:
    path = str(tiny_bert.write(tmp_path / "b.gguf", PoolingType.MEAN))
    field = GGUFReader(path).fields["tokenizer.ggml.tokens"]
    assert gguf_metadata.tokens(path) == [bytes(field.parts[i]) for i in field.data]


@pytest.mark.parametrize(
    ("tokens", "found"),
    [
        ([b"a", b"b", b"c"], None),
        ([b"a", b"b", b"a"], (0, 2, b"a")),
        ([b"a", b"a\x00b"], (0, 1, b"a")),  # read as a C string: cut at the NUL
        ([b"", b""], None),  # each empty one is renamed after its own id
        ([b"[EMPTY_1]", b""], (0, 1, b"[EMPTY_1]")),  # ...which may be another token's text
        ([b"\xff", b"\xfe", b"\xff"], (0, 2, b"\xff")),  # bytes, not text
    ],
)
def test_the_first_token_llama_cpp_would_read_twice(tokens: list[bytes], found: tuple | None) -> None:
    assert vocabulary_check.twice(tokens) == found


def vocabulary(path: Path, tokens: list[str | bytes]) -> str:
    writer = GGUFWriter(str(path), "llama")
    writer.add_token_list([token if isinstance(token, bytes) else token.encode() for token in tokens])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return str(path)


def test_a_gguf_with_a_token_twice_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(vocabulary_check.VocabularyError) as refused:
        vocabulary_check.check(vocabulary(tmp_path / "twice.gguf", ["<s>", "hello", "x", "hello"]))
    assert str(refused.value).startswith("its vocabulary holds the token 'hello' twice (ids 1 and 3)")
    vocabulary_check.check(vocabulary(tmp_path / "once.gguf", ["<s>", "hello", b"\xff\xfe", ""]))


def test_a_file_llama_cpp_cannot_read_is_left_to_llama_cpp(tmp_path: Path) -> None:
    (tmp_path / "not.gguf").write_bytes(b"not a gguf")
    vocabulary_check.check(str(tmp_path / "not.gguf"))
    vocabulary_check.check(str(tmp_path / "missing.gguf"))
