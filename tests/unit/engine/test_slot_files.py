"""Slot files: written whole, read back only by the model and settings that wrote them, unaltered."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.cache import slot_files
from app.engine.cache.slot_files import SlotFile, SlotFileError
from app.engine.checkpoints import Checkpoint


def test_a_slot_file_reads_back_what_was_written(tmp_path: Path) -> None:
    path = tmp_path / "kept.bin"
    written = slot_files.write(path, "fp-1", SlotFile([1, 2, 3, 70000], b"state-bytes"))
    saved, read = slot_files.read(path, "fp-1")
    assert saved == SlotFile([1, 2, 3, 70000], b"state-bytes") and read == written == path.stat().st_size
    assert [p.name for p in tmp_path.iterdir()] == ["kept.bin"]  # no partial file left behind


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda body: body[:-1], "cut short"),
        (lambda body: body + b"x", "bytes too many"),
        (lambda body: body[:-3] + b"XYZ", "checksum"),
        (lambda body: b"GGUF" + body[4:], "not a slot file"),
        (lambda body: body.replace(b'"fp-1"', b'"fp-2"'), "another model"),
        (lambda body: body.replace(b'{"fingerprint"', b'{"fingerprint'), "header"),
    ],
)
def test_an_altered_or_foreign_file_is_refused_with_the_reason(
    tmp_path: Path, change: object, why: str
) -> None:
    path = tmp_path / "kept.bin"
    slot_files.write(path, "fp-1", SlotFile([5, 6], b"abc"))
    path.write_bytes(change(path.read_bytes()))  # type: ignore[operator]
    with pytest.raises(SlotFileError, match=why):
        slot_files.read(path, "fp-1")


def test_a_missing_file_is_said_so(tmp_path: Path) -> None:
    with pytest.raises(SlotFileError, match="no such slot file"):
        slot_files.read(tmp_path / "none.bin", "fp")


def test_checkpoints_and_the_live_range_are_kept_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "window.kv"
    saved = SlotFile([1, 2, 3, 4, 5], b"cells", 3, (Checkpoint(1, b"one"), Checkpoint(2, b"second")))
    slot_files.write(path, "fp-1", saved)
    assert slot_files.read(path, "fp-1")[0] == saved
    assert slot_files.read_listing(path, "fp-1") == ([1, 2, 3, 4, 5], 3, (1, 2), "")
    # Where the state resumes is covered by the checksum: a window said to start earlier is refused.
    path.write_bytes(path.read_bytes().replace(b'"live_from": 3', b'"live_from": 0'))
    assert slot_files.read_listing(path, "fp-1")[1] == 0
    with pytest.raises(SlotFileError, match="checksum"):
        slot_files.read(path, "fp-1")
