"""The benchmark program on a tiny configuration, every part of it, so that it cannot rot."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import run


def test_benchmark_runs_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    markdown, png = tmp_path / "bench.md", tmp_path / "sweep.png"
    code = run.main(
        [
            "--repeats",
            "1",
            "--max-tokens",
            "8",
            "--clients",
            "1,2",
            "--per-client",
            "1",
            "--markdown",
            str(markdown),
            "--chart",
            str(png),
        ]
    )
    assert code == 0
    text = markdown.read_text()
    assert text == capsys.readouterr().out
    for row in (
        "| raw llama-cpp-python |",
        "| ours, direct |",
        "| ours, through nginx |",
        "| peer: llama-cpp-python server |",
        "| ours, 2 workers | 2 |",
        "| peer | 2 |",
    ):
        assert row in text, row
    assert "A second worker adds" in text and "### Memory" in text
    assert png.read_bytes().startswith(b"\x89PNG")
