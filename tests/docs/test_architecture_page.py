"""The contributor's walkthrough names every package and every API folder the code has.

docs/architecture.md is how a newcomer finds their way; a package or an API family added without
a word there fails here, as a page that names a file that is gone fails test_doc_paths.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "architecture.md").read_text()


def packages(folder: Path) -> list[str]:
    return sorted(p.parent.name for p in folder.glob("*/__init__.py"))


def test_every_package_of_the_app_is_described() -> None:
    found = packages(ROOT / "app")
    assert len(found) >= 9 and "engine" in found
    missing = [name for name in found if f"`app/{name}/`" not in PAGE]
    assert not missing, f"docs/architecture.md does not describe app/{missing}"


def test_every_folder_of_the_api_is_in_its_tree() -> None:
    tree = PAGE[PAGE.index("app/api/\n") :]
    tree = tree[: tree.index("```")]
    found = packages(ROOT / "app" / "api")
    assert len(found) >= 20 and "chat" in found
    named = {word.rstrip("/") for line in tree.splitlines() for word in line.split() if word.endswith("/")}
    missing = [name for name in found if name not in named]
    assert not missing, f"the app/api/ tree in docs/architecture.md lacks {missing}"
