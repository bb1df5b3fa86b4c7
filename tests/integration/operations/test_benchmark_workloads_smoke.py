"""The workload benchmarks (speculation, conversations and turns, batch priority) on tiny configurations.

A module of their own beside test_benchmark_smoke.py, so that the slow tier's two pytest
processes (`--dist loadfile`) share the benchmarks' smoke runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import tiny_models
from tests.support.bench_runs import ONE_THREAD, bench

pytestmark = pytest.mark.slow


def test_speculation_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    markdown = tmp_path / "speculation.md"
    ran = bench("speculation", *ONE_THREAD, "--repeats", "1", "--edit-tokens", "8", "--edit-lines", "12",
                "--max-tokens", "8", "--slots", "2", "--markdown", str(markdown))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    text = markdown.read_text()
    assert text == ran.stdout
    rows = ("| ours, no drafts |", "| ours, n-gram drafts |", "| llama-server, no drafts |",
            "| llama-server, ngram-simple |", "| llama-server, ngram-mod |",
            "| f16 |", "| q8_0 |")  # fmt: skip
    for row in rows:
        assert row in text, row
    targets = [line for line in text.split("### Targets")[1].splitlines() if line.startswith("| ")][1:]
    assert (
        len(targets) == 8
    )  # the edit twice, the stories twice, the KV type thrice, and llama-server's modes
    assert all(row.endswith(("| met |", "| — |")) or "| missed" in row for row in targets), targets


def test_conversations_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    markdown = tmp_path / "conversations.md"
    ran = bench("conversations", *ONE_THREAD, "--repeats", "1", "--conversations", "2", "--turns", "2",
                "--max-tokens", "4", "--slots", "2", "--markdown", str(markdown))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    text = markdown.read_text()
    assert text == ran.stdout
    for row in ("| ours, routed by cache |", "| ours, routed by load |", "| 2 llama-servers behind nginx |"):
        assert row in text, row
    targets = [line for line in text.split("### Targets")[1].splitlines() if line.startswith("| ")][1:]
    assert len(targets) == 2 and all(row.endswith("| met |") or "| missed" in row for row in targets), targets


def test_swa_turns_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    markdown = tmp_path / "swa.md"
    ran = bench("swa_turns", *ONE_THREAD, "--repeats", "1", "--conversations", "1", "--answer-tokens", "8",
                "--document-words", "60", "--n-ctx", "1024", "--markdown", str(markdown))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    text = markdown.read_text()
    assert text == ran.stdout
    for row in (
        "| ours, LLM_SWA_FULL=0, checkpoints |",
        "| ours, LLM_SWA_FULL=0, no checkpoints |",
        "| ours (LLM_SWA_FULL=1) |",
        "| llama-server |",
    ):
        assert row in text, row
    (verdict,) = [line for line in text.splitlines() if line.startswith("| a checkpoint makes")]
    assert verdict.endswith("| met |") or verdict.endswith("| missed |"), verdict


def test_turns_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    markdown = tmp_path / "turns.md"
    ran = bench("turns", *ONE_THREAD, "--repeats", "1", "--conversations", "1", "--turns", "2",
                "--max-tokens", "4", "--markdown", str(markdown))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    text = markdown.read_text()
    assert text == ran.stdout
    for row in (
        "| ours, previous_response_id |",
        "| ours, whole history |",
        "| llama-server, whole history |",
    ):
        assert row in text, row
    (verdict,) = [line for line in text.splitlines() if line.startswith("| previous_response_id within")]
    assert verdict.endswith("| met |") or verdict.endswith("| missed |"), verdict


def test_batch_priority_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    markdown = tmp_path / "batch.md"
    ran = bench("batch_priority", *ONE_THREAD, "--repeats", "1", "--probes", "1", "--parallel", "2",
                "--line-tokens", "16", "--gap", "0", "--markdown", str(markdown))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    text = markdown.read_text()
    assert text == ran.stdout
    for target, condition in (("ours", "idle"), ("ours", "beside a batch"), ("llama-server", "idle"),
                              ("ours", "beside the same load as requests"),
                              ("llama-server", "beside the same load as requests")):  # fmt: skip
        assert f"| {target} | {condition} |" in text, (target, condition)
    verdicts = [
        line for line in text.splitlines() if line.startswith(("| interactive TTFT", "| beside a batch"))
    ]
    assert len(verdicts) == 2 and all(v.endswith(("| met |", "| missed |")) for v in verdicts), text


def test_vision_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    markdown = tmp_path / "vision.md"
    ran = bench("vision", *ONE_THREAD, "--tiny", "--repeats", "1", "--questions", "1",
                "--stream-tokens", "40", "--markdown", str(markdown))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    text = markdown.read_text()
    assert text == ran.stdout
    for row in ("| ours |", "| llama-server |", "64 px"):
        assert row in text, row
    targets = [line for line in text.splitlines() if line.endswith(("| met |", "| missed |"))]
    assert len(targets) == 3, text


def test_editing_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    markdown = tmp_path / "editing.md"
    ran = bench("editing", *ONE_THREAD, "--repeats", "1", "--edit-tokens", "8", "--typed", "3",
                "--markdown", str(markdown))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    text = markdown.read_text()
    assert text == ran.stdout
    for row in (
        "| ours, no drafts |",
        "| ours, prediction: the module |",
        "| llama-server, --cache-reuse 256 |",
        "| ours, disk tier |",
        "| ours, no disk tier |",
    ):
        assert row in text, row
    targets = [line for line in text.split("### Targets")[1].splitlines() if line.startswith("| ")][1:]
    assert len(targets) == 3 and all(row.endswith("| met |") or "| missed" in row for row in targets), targets


def test_agents_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    # Recorded with no model; replayed on the greeter (a 32k window that answers at once), llama-server
    # the one built for the tests: this checks the program, not the speed.
    markdown = tmp_path / "agents.md"
    ran = bench("agents", *ONE_THREAD, "--repeats", "1", "--agents", "codex", "opencode",
                "--model", str(tiny_models.path("greeter")), "--llama-server", "same-kernels",
                "--markdown", str(markdown))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    text = markdown.read_text()
    assert text == ran.stdout
    rows = [line for line in text.split("### Targets")[0].splitlines() if line.startswith("| codex |")]
    assert len(rows) == 3  # the session's three requests: the turn, after its tool ran, the next turn
    assert sum(line.startswith("| opencode |") for line in text.splitlines()) >= 3
    targets = [line for line in text.split("### Targets")[1].splitlines() if line.startswith("| ")][1:]
    assert targets and all(row.endswith("| met |") or "| missed" in row for row in targets), targets


def test_long_prompts_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    # The greeter (one layer, SmolLM2's vocabulary) and llama-server as built for the tests: this
    # checks the program, not the speed.
    markdown = tmp_path / "long.md"
    ran = bench("long_prompts", *ONE_THREAD, "--repeats", "1", "--lengths", "300",
                "--model", str(tiny_models.path("greeter")), "--llama-server", "same-kernels",
                "--markdown", str(markdown))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    text = markdown.read_text()
    assert text == ran.stdout
    rows = [line for line in text.split("### Targets")[0].splitlines() if "| 300 |" in line]
    assert len(rows) == 3  # ours, ours with the fastest kernels, llama-server
    assert all(250 <= int(row.split(" | ")[3].replace(",", "")) <= 400 for row in rows), rows
    targets = [line for line in text.split("### Targets")[1].splitlines() if "| 300 |" in line]
    assert len(targets) == 1 and targets[0].endswith(("| met |", "| missed |")), targets


def test_tenants_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    markdown = tmp_path / "tenants.md"
    ran = bench("tenants", *ONE_THREAD, "--rounds", "1", "--markdown", str(markdown))
    assert ran.returncode == 0, ran.stderr
    text = markdown.read_text()
    assert text == ran.stdout

    def evaluated(server: str, turn: str) -> int:
        (row,) = [line for line in text.splitlines() if line.startswith(f"| {server} | {turn} |")]
        return int(row.split("|")[3])

    isolated, shared = "isolated by key (default)", "shared by all keys"
    full = evaluated(isolated, "first tenant, turn 1")
    assert full > 1000 and evaluated(isolated, "other tenants, turn 1") == full  # each tenant its own
    assert evaluated(shared, "other tenants, turn 1") < 100  # the one cache every key reads
    assert evaluated(isolated, "every tenant, turn 2") < 100  # its own first turn resumed
