"""A benchmark run as data: what it measured (tables), its targets met or missed, and where it ran.

Each program's report is markdown for a reader at the terminal; `record` turns it into one JSON
object (headings, paragraphs and tables as cells, the `Targets` table apart, with the date, commit,
machine, versions, command, repeats and the servers' builds) and `--record` appends it to
`bench/results/<program>.jsonl`: one line per run, the newest last. The docs site renders every
benchmark's newest line as its page and the lines before it as the run's history
(`docs/hooks/results.py`), so a figure in the docs is always the one a program wrote.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = 1


def results_dir() -> Path:
    """Where runs are appended: `bench/results/`, or `$LLM_BENCH_RESULTS` (the smoke tests' own)."""
    return Path(os.environ.get("LLM_BENCH_RESULTS") or ROOT / "bench" / "results")


def blocks(markdown: str) -> list[dict[str, Any]]:
    """The report's headings, paragraphs and tables, in order; a table's cells as strings."""
    found: list[dict[str, Any]] = []
    paragraph: list[str] = []
    table: list[list[str]] = []

    def close() -> None:
        if paragraph:
            found.append({"kind": "text", "text": "\n".join(paragraph)})
            paragraph.clear()
        if table:
            found.append({"kind": "table", "columns": table[0], "rows": table[1:]})
            table.clear()

    for line in markdown.splitlines():
        stripped = line.strip()
        if stripped.startswith("|"):
            if paragraph:
                close()
            cells = [cell.strip() for cell in stripped.strip("|").split("|")]
            if not all(re.fullmatch(r":?-+:?", cell) for cell in cells):  # the header's rule
                table.append(cells)
            continue
        if table:
            close()
        heading = re.match(r"(#{1,6})\s+(.*)", stripped)
        if heading:
            close()
            found.append({"kind": "heading", "level": len(heading[1]), "text": heading[2]})
        elif stripped:
            paragraph.append(line.rstrip())
        else:
            close()
    close()
    return found


def verdict(row: list[str]) -> str | None:
    """`met` or `missed` when a cell of the targets row says so (`missed by 2.3 points` too)."""
    for cell in reversed(row):
        word = cell.split(" ", 1)[0].strip("*").lower()
        if word in ("met", "missed"):
            return word
    return None


def split_targets(found: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The report without its targets: the tables of a `Targets` section, and any table whose
    last column is the verdict."""
    kept: list[dict[str, Any]] = []
    targets: list[dict[str, Any]] = []
    inside: int | None = None  # the level of the Targets heading while its section runs
    for block in found:
        if block["kind"] == "heading":
            if inside is not None and block["level"] <= inside:
                inside = None
            if block["text"].strip().lower().startswith("targets"):
                inside = block["level"]
                continue
        table = block["kind"] == "table"
        judged = table and (block["columns"][-1].lower() == "verdict" or inside is not None)
        if judged and any(verdict(row) for row in block["rows"]):
            targets.append({"columns": block["columns"], "rows": block["rows"]})
        elif inside is None or table:  # a table of figures printed after the targets stays a figure
            kept.append(block)
    return kept, targets


def record(program: str, markdown: str, facts: dict[str, Any]) -> dict[str, Any]:
    """One run: `facts` (provenance.facts(): date, commit, machine, versions, command, servers...)
    and the report's blocks, its title (a leading `# ` heading) and its targets apart."""
    found = blocks(markdown)
    title = None
    if found and found[0]["kind"] == "heading" and found[0]["level"] == 1:
        title = found.pop(0)["text"]
    kept, targets = split_targets(found)
    verdicts = [verdict(row) for table in targets for row in table["rows"]]
    return {
        "schema": SCHEMA,
        "benchmark": program,
        "title": title,
        **facts,
        "blocks": kept,
        "targets": targets,
        "met": verdicts.count("met"),
        "missed": verdicts.count("missed"),
    }


def append(run: dict[str, Any], folder: Path | None = None) -> Path:
    """Add `run` as the newest line of its benchmark's data file; the file's path."""
    target = (folder or results_dir()) / f"{run['benchmark']}.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a") as out:
        out.write(json.dumps(run, ensure_ascii=False, sort_keys=True) + "\n")
    return target


def runs(path: Path) -> list[dict[str, Any]]:
    """Every run a data file holds, oldest first."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def table(columns: list[str], rows: list[list[str]]) -> str:
    """Markdown for one table of cells."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def render(found: list[dict[str, Any]], shift: int = 0, headings: bool = True) -> str:
    """Markdown for blocks, headings moved `shift` levels down (to sit under a page's own), or set
    in bold where a heading cannot stand (a folded block)."""
    parts = []
    for block in found:
        if block["kind"] == "heading":
            level = min(6, block["level"] + shift)
            parts.append("#" * level + " " + block["text"] if headings else f"**{block['text']}**")
        elif block["kind"] == "text":
            parts.append(block["text"])
        else:
            parts.append(table(block["columns"], block["rows"]))
    return "\n\n".join(parts)
