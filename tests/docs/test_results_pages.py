"""Benchmark pages a reader can check: every figure on them is a run a program recorded, with where it ran."""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path

from harness import recorded_runs

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
PROGRAMS = sorted(
    p.stem for p in (ROOT / "bench").glob("*.py") if "add_output_options(parser)" in p.read_text()
)


def test_every_benchmark_program_has_its_runs_as_data() -> None:
    assert len(PROGRAMS) >= 20 and "run" in PROGRAMS and "long_prompts" in PROGRAMS
    assert sorted(p.stem for p in RESULTS.glob("*.jsonl")) == PROGRAMS
    # No report typed as a page: the pages are rendered from the data.
    assert not list((ROOT / "docs").rglob("*-result.md")) and not list((ROOT / "docs").rglob("*.json"))


def test_every_run_says_where_when_and_on_what_code_it_ran() -> None:
    for program in PROGRAMS:
        runs = recorded_runs.runs(RESULTS / f"{program}.jsonl")
        assert runs, program
        assert [r["date"] for r in runs] == sorted(r["date"] for r in runs), f"{program}: not oldest first"
        for run in runs:
            assert run["benchmark"] == program and run["schema"] == recorded_runs.SCHEMA
            assert re.fullmatch(r"\d{4}-\d\d-\d\d(T\d\d:\d\dZ)?", run["date"]), run["date"]
            verdicts = [recorded_runs.verdict(row) for t in run["targets"] for row in t["rows"]]
            assert (run["met"], run["missed"]) == (verdicts.count("met"), verdicts.count("missed"))
            migrated = run.get("migrated")
            if migrated:  # a report written before runs were data: the commit it was committed in
                assert _is_commit(migrated["committed_in"]), (program, migrated)
                continue
            assert _is_commit(run["commit"].split()[0]), (program, run["commit"])
            assert run["machine"]["cpu"] and run["machine"]["cores"] and run["repeats"] is not None
            assert run["command"].startswith(f"python -m bench.{program}")
            assert run["servers"]["ours"].startswith("this repository at ")
            assert run["versions"]["llama_cpp_python"] and run["versions"]["python"]


def test_each_benchmark_page_shows_its_newest_run_and_folds_the_rest(site: Path) -> None:
    for program in PROGRAMS:
        runs = recorded_runs.runs(RESULTS / f"{program}.jsonl")
        newest = runs[-1]
        markup = (site / "performance" / "results" / program / "index.html").read_text()
        page = _text(markup)
        assert "The newest run" in page and "Targets" in page and newest["date"] in page, program
        for table in newest["targets"]:
            for row in table["rows"]:
                assert _text(row[0]) in page, (program, row)
        for block in newest["blocks"]:
            if block["kind"] == "table":
                assert all(_text(" ".join(row)) in _cells(page) for row in block["rows"]), program
        folded = markup.count('<details class="note">')
        assert folded == len(runs) - 1, (program, folded)


def test_the_benchmarks_page_lists_every_benchmark_with_its_newest_run(site: Path) -> None:
    page = (site / "performance" / "benchmarks" / "index.html").read_text()
    for program in PROGRAMS:
        newest = recorded_runs.runs(RESULTS / f"{program}.jsonl")[-1]
        row = re.search(rf'href="[./]*results/{program}/".*?</tr>', page, re.S)
        assert row, program
        assert newest["date"][:10] in row[0], program
        assert f"{newest['met']} met, {newest['missed']} missed" in row[0] or not newest["targets"], program


def test_the_kernels_page_quotes_only_figures_a_run_recorded() -> None:
    """Its tables are pivots of recorded runs: every number in them is in those runs' data."""
    page = (ROOT / "docs" / "performance" / "kernels.md").read_text()
    measured = page[page.index("## Measured") :]
    recorded = " ".join(
        json.dumps(r, ensure_ascii=False) for p in ("kernels", "long_prompts", "run")
        for r in recorded_runs.runs(RESULTS / f"{p}.jsonl")
    ).replace(",", "")  # fmt: skip
    values = {float(v) for v in re.findall(r"\d+(?:\.\d+)?", recorded)}
    known = {f"{v:.{digits}f}" for v in values for digits in (0, 1, 2)}  # as a page rounds them
    rows = [
        line for line in measured.splitlines() if line.startswith("| ") and not line.startswith("| model")
    ]
    numbers = {n.replace(",", "") for line in rows for n in re.findall(r"\d[\d,]*(?:\.\d+)?", line)}
    numbers -= {"1", "2", "4", "8", "3", "20", "7.5", "1500", "1200", "135", "270"}  # labels, not figures
    assert rows and numbers and numbers <= known, sorted(numbers - known)


def _is_commit(name: str) -> bool:
    found = subprocess.run(["git", "cat-file", "-e", f"{name}^{{commit}}"], cwd=ROOT, capture_output=True)
    return found.returncode == 0


def _text(markup: str) -> str:
    """Text as a reader sees it: tags and markdown's marks out, entities read, spaces collapsed."""
    plain = html.unescape(re.sub(r"<[^>]+>", " ", markup)).replace("`", "").replace("**", "")
    return re.sub(r"\s+", " ", plain).strip()


def _cells(page: str) -> str:
    return re.sub(r"\s+", " ", page)
