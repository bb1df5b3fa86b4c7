"""mkdocs hook: a page that is visibly broken fails the strict build, as a broken link does.

Two mistakes a reader meets and a link checker does not: a page that stops mid-sentence (a
paragraph cut off, the rest pasted elsewhere), and a page whose heading repeats its title. Each
is a warning, which `mkdocs build --strict` (`make docs`, the docs tier) turns into a failure.
"""

from __future__ import annotations

import logging
import re

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

log = logging.getLogger("mkdocs.hooks.page_checks")
_FENCE = re.compile(r"^(```|~~~)")
_ENDED = re.compile(r"[.!?][)\"'*_`]*$")


def last_block(markdown: str) -> list[str]:
    """The page's last block (paragraph, list, table, code fence or heading), as its lines."""
    lines = [line.rstrip() for line in markdown.strip().splitlines()]
    if lines and _FENCE.match(lines[-1]):
        return lines[-1:]  # a code block: nothing to finish
    block: list[str] = []
    for line in reversed(lines):
        if not line.strip():
            break
        block.insert(0, line)
    return block


def problems(markdown: str) -> list[str]:
    """What is visibly wrong with a page's markdown."""
    found = []
    block = last_block(markdown)
    first, last = (block[0].lstrip(), block[-1].strip()) if block else ("", "")
    prose = first and not re.match(r"([-*+|>#<\[]|\d+\.\s|```|~~~|!!!)", first)
    if first.startswith("#"):
        found.append(f"it ends with a heading ({first!r})")
    elif prose and not _ENDED.search(last):
        found.append(f"it ends mid-sentence ({last[-60:]!r})")
    headings = [m.groups() for m in re.finditer(r"^(#{1,6})\s+(.+?)\s*$", _outside_code(markdown), re.M)]
    titles = [text for level, text in headings if level == "#"]
    if titles and [text for _, text in headings].count(titles[0]) > 1:
        found.append(f"a heading repeats its title ({titles[0]!r})")
    return found


def _outside_code(markdown: str) -> str:
    """The markdown with its fenced code blocks left out (a `#` there is a comment, not a heading)."""
    kept, inside = [], False
    for line in markdown.splitlines():
        if _FENCE.match(line.strip()):
            inside = not inside
        elif not inside:
            kept.append(line)
    return "\n".join(kept)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    for problem in problems(markdown):
        log.warning("%s: %s", page.file.src_uri, problem)
    return markdown
