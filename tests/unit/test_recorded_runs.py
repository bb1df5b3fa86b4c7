"""A benchmark's report becomes a run of data and renders back to its own tables: what the docs pages show."""

from __future__ import annotations

from pathlib import Path

from harness import recorded_runs

REPORT = """# Main benchmark after a change (2026-12-06)

Model `x.gguf`, 2 threads.

### One stream

| target | decode tokens/s | vs llama-server |
|---|---|---|
| ours | 104.9 (98.0–110.2) | 97.4% |
| llama-server | 107.7 (101.0–112.0) | 100.0% |

### Targets

| target | measured | verdict |
|---|---|---|
| single-stream decode at least 100% of llama-server's | 104.9 against 107.7 | missed by 2.6 points |
| no failed stream | 0 failed | met |

| model | prompt | tokens/s |
|---|---|---|
| Gemma 3 | 3,000 | 606 |

### Memory

| target | measured | verdict |
|---|---|---|
| a second worker adds less than the first | 250 MiB | met |
"""

FACTS = {
    "date": "2026-12-06T19:00Z",
    "commit": "abc1234",
    "machine": {"cpu": "AMD EPYC", "cores": 2, "arch": "x86_64"},
    "versions": {},
    "command": "python -m bench.run",
    "repeats": 3,
    "servers": {},
}


def test_a_report_becomes_blocks_its_title_and_its_targets_apart() -> None:
    run = recorded_runs.record("run", REPORT, FACTS)
    assert run["title"] == "Main benchmark after a change (2026-12-06)"
    assert run["commit"] == "abc1234" and run["benchmark"] == "run"
    # Both targets tables: the Targets section's, and one elsewhere whose last column is the verdict.
    assert [t["rows"][0][-1] for t in run["targets"]] == ["missed by 2.6 points", "met"]
    assert (run["met"], run["missed"]) == (2, 1)
    kinds = [(b["kind"], b.get("text", "")) for b in run["blocks"]]
    assert ("heading", "Targets") not in kinds
    # A table of figures printed after the targets (a second model's run) stays a figure.
    figures = [b for b in run["blocks"] if b["kind"] == "table"]
    assert [t["columns"][0] for t in figures] == ["target", "model"]
    assert figures[0]["rows"][0] == ["ours", "104.9 (98.0–110.2)", "97.4%"]


def test_the_blocks_render_back_to_the_report_tables(tmp_path: Path) -> None:
    run = recorded_runs.record("run", REPORT, FACTS)
    rendered = recorded_runs.render(run["blocks"])
    for line in REPORT.splitlines():
        if line.startswith("| ours") or line.startswith("| Gemma") or line.startswith("Model "):
            assert line in rendered, line
    assert "### One stream" in rendered and "#### One stream" in recorded_runs.render(run["blocks"], shift=1)
    assert "**One stream**" in recorded_runs.render(run["blocks"], headings=False)
    # Appended as one line per run, the newest last, read back whole.
    recorded_runs.append(run, tmp_path)
    recorded_runs.append({**run, "commit": "def5678"}, tmp_path)
    assert [r["commit"] for r in recorded_runs.runs(tmp_path / "run.jsonl")] == ["abc1234", "def5678"]


def test_verdicts_are_read_from_the_cell_that_gives_them() -> None:
    assert recorded_runs.verdict(["x", "1.12×", "met"]) == "met"
    assert recorded_runs.verdict(["x", "missed by 4.9 points"]) == "missed"
    assert recorded_runs.verdict(["metres", "5"]) is None
    assert recorded_runs.verdict(["ours", "—"]) is None
