"""The views stay thin by construction: each declares its route and hands a typed request over (vLLM's
api_router beside its serving), and no view reads the body again once it is parsed."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MOST_LINES = 12  # a view's def to its last line, docstring included


def _views() -> list[tuple[str, ast.FunctionDef]]:
    found = []
    for module in sorted((ROOT / "app").rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.FunctionDef) and any(
                ast.unparse(d).startswith(("bp.", "app.route", "bp.route")) for d in node.decorator_list
            ):
                found.append((f"{module.relative_to(ROOT)}:{node.name}", node))
    return found


def test_every_view_is_at_most_twelve_lines() -> None:
    views = _views()
    assert len(views) > 60, "the views were not found: the check would prove nothing"
    lengths = [(name, (node.end_lineno or node.lineno) - node.lineno + 1) for name, node in views]
    long = [(name, lines) for name, lines in lengths if lines > MOST_LINES]
    assert not long, f"views past {MOST_LINES} lines (hand the work to the family's serving.py): {long}"


def test_no_module_of_the_api_reads_the_json_body_but_the_parser_and_the_front() -> None:
    # http/body.py parses and validates every body once; the front (routing/front.py) reads only
    # `model`, before the view, to pick the worker. Nothing reads the body again after its parse.
    allowed = {"app/api/http/body.py", "app/api/routing/front.py"}
    readers = [
        str(module.relative_to(ROOT))
        for module in sorted((ROOT / "app" / "api").rglob("*.py"))
        if "request.get_json(" in module.read_text() and str(module.relative_to(ROOT)) not in allowed
    ]
    assert not readers, f"modules reading request.get_json beside the parser: {readers}"
    assert all("request.get_json(" in (ROOT / name).read_text() for name in allowed)  # the rule still bites
