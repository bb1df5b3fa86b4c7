"""The benchmark program on a tiny configuration, every part of it, so that it cannot rot."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import embeddings, run


@pytest.mark.timeout(3600)  # the first run builds llama.cpp's server (about ten minutes on two cores)
def test_benchmark_runs_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    markdown, png = tmp_path / "bench.md", tmp_path / "sweep.png"
    code = run.main(
        ["--repeats", "1", "--max-tokens", "8", "--contention-tokens", "16", "--clients", "1,2",
         "--slots", "2", "--per-client", "1", "--markdown", str(markdown), "--chart", str(png)]
    )  # fmt: skip
    assert code == 0
    text = markdown.read_text()
    assert text == capsys.readouterr().out
    for row in (
        "| raw llama-cpp-python |",
        "| ours |",
        "| ours, through nginx |",
        "| llama.cpp llama-server |",
        "| llama-cpp-python server |",
        "| ours | 2 |",
        "| llama.cpp llama-server | 2 |",
        "| llama-cpp-python server | 2 |",
    ):
        assert row in text, row
    assert "### One stream beside a busy process" in text and "### Memory" in text
    assert "A second worker adds" in text
    targets = [line for line in text.split("### Targets")[1].splitlines() if line.startswith("| ")][1:]
    assert len(targets) == 6  # 1 client, one stream against raw and llama-server, contention twice, failures
    assert all(row.endswith("| met |") or "| missed" in row for row in targets), targets
    assert png.read_bytes().startswith(b"\x89PNG")


def test_embedding_benchmark_runs_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    markdown = tmp_path / "embeddings.md"
    code = embeddings.main(
        ["--repeats", "1", "--total", "4", "--sizes", "1,4", "--clients", "2", "--markdown", str(markdown)]
    )
    assert code == 0
    text = markdown.read_text()
    assert text == capsys.readouterr().out
    for row in ("| ours |", "| llama.cpp llama-server |", "| raw llama-cpp-python |"):
        assert row in text, row
    targets = [line for line in text.split("### Targets")[1].splitlines() if line.startswith("| ")][1:]
    assert len(targets) == 4  # each column against llama-server, the largest request against raw
    assert all(row.endswith("| met |") or "| missed" in row for row in targets), targets
