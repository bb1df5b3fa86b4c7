"""mkdocs hook: one page per benchmark, rendered from the runs its program recorded.

Every `bench/results/<program>.jsonl` becomes `performance/results/<program>.md`: what the
program measures (its docstring), the newest run's provenance (date, commit, machine, versions,
command, repeats, how each server was built), its targets met or missed, its figures, and every
earlier run folded below it. `performance/benchmarks.md` gets the index of them all. Nothing on
these pages is typed by hand, so a figure on the site is always one a program wrote.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # mkdocs loads a hook by its path, with the project's root not on sys.path
from harness import recorded_runs  # noqa: E402

INDEX_MARK = "<!-- generated: benchmark results -->"
FOLDER = "performance/results"


def programs() -> dict[str, list[dict[str, Any]]]:
    """Each benchmark program with recorded runs, and its runs, oldest first."""
    return {
        path.stem: recorded_runs.runs(path) for path in sorted((ROOT / "bench" / "results").glob("*.jsonl"))
    }


def described(program: str) -> tuple[str, str]:
    """The program's docstring as a title (its first line) and the text that follows."""
    docstring = ast.get_docstring(ast.parse((ROOT / "bench" / f"{program}.py").read_text())) or program
    first, _, rest = docstring.partition("\n")
    title = first.removeprefix("Benchmark: ").rstrip(".")
    return title[0].upper() + title[1:], rest.strip()


def provenance(run: dict[str, Any]) -> str:
    """Markdown: where, when and how a run was made, as far as it was recorded."""
    machine = run["machine"]
    cores = f"{machine['cores']} cores" if machine["cores"] else "cores not recorded"
    described_machine = ", ".join([machine["cpu"] or "CPU model not recorded", cores, machine["arch"] or "?"])
    rows = [
        ["date", run["date"]],
        ["commit", f"`{run['commit']}`" if run["commit"] else "not recorded"],
        ["machine", described_machine],
        ["versions", ", ".join(f"{name} {v}" for name, v in run["versions"].items()) or "not recorded"],
        ["command", f"`{run['command']}`" if run["command"] else "as its report says"],
        ["repeats", str(run["repeats"] or "as its report says")],
    ]
    rows += [[f"server: {name}", how] for name, how in run["servers"].items()]
    if not run["servers"]:
        rows.append(["servers", "as its report says (recorded before builds were)"])
    migrated = run.get("migrated")
    if migrated:
        source, commit = migrated["from"], migrated["committed_in"]
        rows.append(["recorded", f"converted from `{source}`, the report as committed in `{commit}`"])
    return recorded_runs.table(["", ""], [[f"**{k}**", v.replace("|", "\\|")] for k, v in rows])


def verdicts(run: dict[str, Any]) -> str:
    """Markdown: the run's targets tables, or that it set none."""
    if not run["targets"]:
        return "This run's report sets no targets met or missed."
    head = f"{run['met']} met, {run['missed']} missed."
    return "\n\n".join([head, *(recorded_runs.table(t["columns"], t["rows"]) for t in run["targets"])])


def headline(run: dict[str, Any]) -> str:
    return run["title"] or f"run of {run['date'][:10]}"


def results_page(program: str, runs: list[dict[str, Any]]) -> str:
    """Markdown: a benchmark's page, its newest run first."""
    title, about = described(program)
    newest = runs[-1]
    parts = [f"# {title}", about, f"## The newest run: {headline(newest)}", provenance(newest)]
    parts += ["### Targets", verdicts(newest), "### Figures", recorded_runs.render(newest["blocks"], shift=3)]
    if len(runs) > 1:
        parts += ["## Earlier runs", "Newest first, each as its program recorded it."]
        for run in reversed(runs[:-1]):
            figures = recorded_runs.render(run["blocks"], headings=False)
            inner = "\n\n".join([provenance(run), verdicts(run), figures])
            body = "\n".join(f"    {line}" if line else "" for line in inner.splitlines())
            parts.append(f'??? note "{run["date"][:10]}: {headline(run)}"\n\n{body}')
    return "\n\n".join(parts) + "\n"


def index(found: dict[str, list[dict[str, Any]]]) -> str:
    """Markdown: every benchmark, its newest run's date and commit, and its targets met or missed."""
    rows = []
    for program, runs in found.items():
        newest = runs[-1]
        judged = f"{newest['met']} met, {newest['missed']} missed" if newest["targets"] else "none set"
        migrated = newest.get("migrated")
        commit = f"`{newest['commit']}`" if newest["commit"] else "not recorded"
        if migrated and not newest["commit"]:
            commit = f"committed in `{migrated['committed_in']}`"
        link = f"[{described(program)[0]}](results/{program}.md)"
        rows.append([link, f"`bench.{program}`", newest["date"][:10], commit, judged, str(len(runs))])
    return recorded_runs.table(
        ["benchmark", "program", "newest run", "commit", "targets", "runs recorded"], rows
    )


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for program, runs in programs().items():
        files.append(File.generated(config, f"{FOLDER}/{program}.md", content=results_page(program, runs)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if page.file.src_uri == "performance/benchmarks.md":
        return markdown.replace(INDEX_MARK, index(programs()))
    return markdown
