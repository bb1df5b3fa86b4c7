"""Slot file names: plain names inside LLM_SLOT_SAVE_PATH, never a way out of it."""

from __future__ import annotations

import pytest

from app.api.slots.schemas import valid_filename


@pytest.mark.parametrize("name", ["slot0.bin", "conversation-42", "día.bin", "a" * 255])
def test_plain_names_are_taken(name: str) -> None:
    assert valid_filename(name)


@pytest.mark.parametrize(
    "name",
    [
        "",
        ".",
        "..",
        "../x",
        "a/b",
        "/etc/passwd",
        "a\\b",
        "c:x",
        ".hidden",
        " x",
        "x ",
        "x\n",
        "a\0b",
        "é" * 128,
    ],
)
def test_names_that_leave_the_folder_or_hide_are_refused(name: str) -> None:
    assert not valid_filename(name)
