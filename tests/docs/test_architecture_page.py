"""The contributor's walkthrough names every package and every API folder the code has.

docs/architecture.md is how a newcomer finds their way; a package or an API family added without
a word there fails here, as a page that names a file that is gone fails test_doc_paths.
"""

from __future__ import annotations

import re
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


def test_every_part_of_the_engine_and_every_test_folder_is_named() -> None:
    engine = PAGE[PAGE.index("app/engine/\n") :]
    engine = engine[: engine.index("```")]
    parts = packages(ROOT / "app" / "engine")
    assert len(parts) >= 6 and "cache" in parts
    assert not [name for name in parts if f"{name}/" not in engine], "the engine's tree lacks a part"
    folders = packages(ROOT / "tests" / "integration")
    assert len(folders) >= 7 and "api" in folders
    assert not [name for name in folders if f"`{name}/`" not in PAGE], "a tests/integration folder is unnamed"


def core_path() -> list[Path]:
    """The files 'One chat request, file by file' and 'The engine's step' name, in order: a bare
    name is in the folder of the path named just before it, else the one file of that name."""
    text = PAGE[PAGE.index("## One chat request") : PAGE.index("## One Responses request")]
    text += PAGE[PAGE.index("## The engine's step") : PAGE.index("## Adding an API family")]
    files, folder = [], ROOT / "app"
    for name in re.findall(r"`((?:app/)?[\w/]+(?:\.py|/))`", text):
        if name.endswith("/"):  # a folder: the bare names after it are its files
            folder = ROOT / name if name.startswith("app/") else folder
            continue
        if name.startswith("app/"):
            path = ROOT / name
            folder = path.parent
        elif "/" in name:  # outside app/ (a test's fake): not the server's code
            continue
        elif (folder / name).is_file():
            path = folder / name
        else:
            (path,) = [p for p in (ROOT / "app").rglob(name) if "tests" not in p.parts]
        assert path.is_file(), name
        if path not in files:
            files.append(path)
    return files


def lines(paths: list[Path]) -> int:
    return sum(len(path.read_text().splitlines()) for path in paths)


def test_what_the_readme_says_of_reading_the_code_is_measured() -> None:
    # "whose core path (one chat request, through the engine's step: about 7,000 of its 31,000
    # lines, walked file by file in Architecture)": the files the walkthrough names, against app/.
    readme, index = (ROOT / "README.md").read_text(), (ROOT / "docs" / "index.md").read_text()
    claim = re.search(r"about ([\d,]+) of its ([\d,]+) lines", readme)
    assert claim, "README.md no longer says how much of the code the core path is"
    core, every = (int(n.replace(",", "")) for n in claim.groups())
    measured_core = lines(core_path())
    measured_all = lines(sorted((ROOT / "app").rglob("*.py")))
    assert abs(measured_core - core) <= 0.15 * core, f"the core path is {measured_core} lines"
    assert abs(measured_all - every) <= 0.05 * every, f"app/ is {measured_all} lines"
    assert f"about {claim.group(1)} lines" in index, "docs/index.md says another size"
