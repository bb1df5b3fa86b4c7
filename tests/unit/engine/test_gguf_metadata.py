"""The GGUF header reader gives what llama.cpp's own gguf package reads, long arrays left out."""

from __future__ import annotations

from pathlib import Path

import pytest
from gguf import GGUFReader, PoolingType

from app.engine.gguf import gguf_metadata
from app.settings.values import default_model_path
from tests.support import tiny_bert


@pytest.mark.parametrize("which", ["default", "bert"])
def test_the_header_reads_as_the_gguf_package_reads_it(which: str, tmp_path: Path) -> None:
    path = (
        default_model_path()
        if which == "default"
        else str(tiny_bert.write(tmp_path / "b.gguf", PoolingType.MEAN))
    )
    ours = gguf_metadata.of(path)
    theirs = {
        key: field.contents() for key, field in GGUFReader(path).fields.items() if not key.startswith("GGUF.")
    }
    kept = {
        key
        for key, value in theirs.items()
        if not isinstance(value, list) or len(value) <= gguf_metadata.KEPT_ARRAY
    }
    assert set(ours) == kept  # the vocabulary and merges left out, nothing else
    for key in kept:
        assert (
            ours[key] == pytest.approx(theirs[key])
            if isinstance(theirs[key], float)
            else ours[key] == theirs[key]
        )


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "weights.bin"
    other.write_bytes(b"PK\x03\x04" + bytes(64))
    with pytest.raises(ValueError, match="is not a GGUF file"):
        gguf_metadata.of(str(other))
