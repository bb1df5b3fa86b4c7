"""The benchmark program on a tiny configuration, every part of it, so that it cannot rot."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from harness import recorded_runs
from harness.servers import ROOT
from tests.support.bench_runs import ONE_THREAD, bench

pytestmark = pytest.mark.slow


@pytest.mark.timeout(3600)  # the first run builds llama.cpp's server (about ten minutes on two cores)
def test_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    markdown, png = tmp_path / "bench.md", tmp_path / "sweep.png"
    ran = bench(
        "run", *ONE_THREAD, "--repeats", "1", "--max-tokens", "8", "--contention-tokens", "16",
        "--clients", "1,2", "--slots", "4", "--per-client", "1",
        "--running", "2", "--arrivals", "1", "--arrival-tokens", "200", "--reproducible",
        "--sessions", "2", "--session-turns", "2", "--prefix-tokens", "200",
        "--llama-server", "same-kernels",
        "--markdown", str(markdown), "--chart", str(png),
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    text = markdown.read_text()
    assert text == ran.stdout
    # When, on which commit and on which machine: the line every result file opens with.
    assert re.match(r"Run on \d{4}-\d\d-\d\d at commit `[0-9a-f]{7,}.*`, on .+ \(\d+ cores, ", text), text[
        :300
    ]
    for row in (
        "| raw llama-cpp-python |",
        "| ours |",
        "| ours, through nginx |",
        "| llama.cpp llama-server |",
        "| llama-cpp-python server |",
        "| ours | 2 |",
        "| llama.cpp llama-server | 2 |",
        "| llama-cpp-python server | 2 |",
        "| ours, LLM_BATCH_INVARIANT=1 | 2 |",
    ):
        assert row in text, row
    assert "### One stream beside a busy process" in text and "### Memory" in text
    assert "A second worker adds" in text
    assert "### 1 prompts of about 200 tokens arriving while 2 streams run" in text
    # --reproducible: what the reproducible mode costs and the rest of the gap, per level and alone.
    shares = text.split("### What the reproducible mode costs")[1].split("###")[0]
    assert [line.split("|")[1].strip() for line in shares.splitlines() if line.startswith("| ")][1:] == [
        "1", "2", "one stream",
    ]  # fmt: skip
    targets = [line for line in text.split("### Targets")[1].splitlines() if line.startswith("| ")][1:]
    # Agent-shaped sessions: each server's first and later turns, nothing failed.
    agents = text.split("### Agent-shaped sessions: a shared prefix of about 200 tokens, 2 turns each")[1]
    rows = [line.split("|") for line in agents.split("###")[0].splitlines() if line.startswith("| ")][1:]
    assert [(row[1].strip(), row[2].strip(), row[-2].strip()) for row in rows] == [
        ("ours", "2", "0"), ("ours, LLM_BATCH_INVARIANT=1", "2", "0"), ("llama.cpp llama-server", "2", "0"),
    ]  # fmt: skip
    # Throughput, TTFT and inter-token latency at 1 and 2 clients, one stream against raw and
    # llama-server, contention twice, the running streams while a long prompt arrives, the
    # sessions' later turns, failures.
    assert len(targets) == 13
    assert all(row.endswith("| met |") or "| missed" in row for row in targets), targets
    assert png.read_bytes().startswith(b"\x89PNG")


def test_embedding_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    markdown = tmp_path / "embeddings.md"
    ran = bench(
        "embeddings", *ONE_THREAD, "--repeats", "1", "--total", "4", "--sizes", "1,4", "--clients", "2",
        "--llama-server", "tests", "--markdown", str(markdown),
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    text = markdown.read_text()
    assert text == ran.stdout
    for row in ("| ours |", "| llama.cpp llama-server |", "| raw llama-cpp-python |"):
        assert row in text, row
    targets = [line for line in text.split("### Targets")[1].splitlines() if line.startswith("| ")][1:]
    assert len(targets) == 4  # each column against llama-server, the largest request against raw
    assert all(row.endswith("| met |") or "| missed" in row for row in targets), targets


def test_batcher_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    other = tmp_path / "other-checkout"
    other.symlink_to(ROOT)  # a second checkout, here the same code
    ran = bench("batcher", "--sequences", "2", "--tokens", "4", "--rounds", "1", "--alternate", "1",
                "--other", str(other))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    rows = [line for line in ran.stdout.splitlines() if line.startswith(("| /", f"| {other}"))]
    assert [row.split(" | ")[0] for row in rows] == [f"| {ROOT}", f"| {other}"], ran.stdout
    assert all(row.endswith("| 1 |") for row in rows), ran.stdout


def test_scrape_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    """Its report, and with --record the same run appended as data to the benchmark's results file."""
    markdown = tmp_path / "scrape.md"
    ran = bench("scrape", "--repeats", "1", "--tokens", "8", "--slots", "2", "--rest-seconds", "0.5",
                "--markdown", str(markdown), "--record",
                env={"LLM_BENCH_RESULTS": str(tmp_path)})  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    text = markdown.read_text()
    assert text == ran.stdout
    names = ("| ours (2 workers) |", "| ours, LLM_METRICS_MAX_AGE=1 |", "| llama.cpp llama-server |")
    rows = [line for line in text.splitlines() if line.startswith(names) and " / " in line]
    assert len(rows) == 3, text
    (run,) = recorded_runs.runs(tmp_path / "scrape.jsonl")
    assert run["benchmark"] == "scrape" and run["repeats"] == 1 and run["commit"] != "unknown"
    assert run["command"].startswith("python -m bench.scrape --repeats 1 ")
    assert run["machine"]["cores"] == os.cpu_count() and run["machine"]["cpu"]
    assert any(name.startswith("llama-server, our wheel's options") for name in run["servers"]), run[
        "servers"
    ]
    (targets,) = run["targets"]
    assert [row[0].split(":")[0] for row in targets["rows"]] == [
        "ours (2 workers)",
        "ours, LLM_METRICS_MAX_AGE=1",
    ]
    assert run["met"] + run["missed"] == 2
    # The data renders back to the report's own tables (the docs page is made from it).
    assert all(f"| {' | '.join(row)} |" in text for block in run["blocks"] if block["kind"] == "table"
               for row in block["rows"])  # fmt: skip


@pytest.mark.timeout(3600)
def test_cold_load_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    markdown = tmp_path / "cold.md"
    ran = bench(
        "cold_load", *ONE_THREAD, "--repeats", "1", "--llama-server", "tests", "--markdown", str(markdown)
    )
    assert ran.returncode == 0, ran.stderr
    text = markdown.read_text()
    assert text == ran.stdout
    for target, condition in (("ours", "cold"), ("ours", "swap (evict the other, load)"), ("ours", "warm"),
                              ("llama-server router", "cold"), ("llama-server router", "warm"),
                              ("llama.cpp load (llama-cpp-python)", "load time")):  # fmt: skip
        assert f"| {target} | {condition} |" in text, (target, condition)
    verdicts = [line for line in text.splitlines() if line.startswith(("| cold TTFT", "| a cold load"))]
    assert len(verdicts) == 2 and all(v.endswith(("| met |", "| missed |")) for v in verdicts), text


@pytest.mark.timeout(3600)
def test_lora_mix_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    markdown = tmp_path / "lora.md"
    ran = bench("lora_mix", *ONE_THREAD, "--repeats", "1", "--requests", "1", "--tokens", "8",
                "--llama-server", "tests", "--markdown", str(markdown))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    text = markdown.read_text()
    assert text == ran.stdout
    for mix in ("base", "one adapter", "two sets", "four sets"):
        assert text.count(f"| {mix}") == 2, mix  # its figures, and its target's verdict
    verdicts = [line for line in text.splitlines() if "of llama-server's tokens/s" in line]
    assert len(verdicts) == 4 and all(v.endswith(("| met |", "| missed |")) for v in verdicts), text


def test_request_priority_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    markdown = tmp_path / "priority.md"
    ran = bench("request_priority", *ONE_THREAD, "--repeats", "1", "--probes", "1", "--parallel", "1",
                "--line-tokens", "8", "--gap", "0", "--markdown", str(markdown))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    text = markdown.read_text()
    assert text == ran.stdout
    for row in ("| ours | idle |", "| ours | behind the queue, first come first served |",
                "| ours | behind the queue, priority -10 |",
                "| llama-server | behind the queue, first come first served |"):  # fmt: skip
        assert row in text, row
    verdicts = [line for line in text.splitlines() if line.startswith("| with priority")]
    assert len(verdicts) == 2 and all(v.endswith(("| met |", "| missed |")) for v in verdicts), text


def test_grammar_engines_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    markdown = tmp_path / "engines.md"
    ran = bench("grammar_engines", "--repeats", "1", "--markdown", str(markdown))
    assert ran.returncode == 0, ran.stderr
    text = markdown.read_text()
    assert text == ran.stdout
    rows = [line for line in text.splitlines() if line.startswith("| ") and " | " in line[2:]]
    assert sum(1 for row in rows if "| enforces |" in row) >= 10, text  # both enforce the common features
    verdicts = [line for line in text.splitlines() if line.startswith(("| llguidance", "| adopt"))]
    assert len(verdicts) == 3 and all(v.endswith(("| met |", "| missed |")) for v in verdicts), text
