"""LLM_CACHE_SHARING: whose cached prompts a key's requests may resume (`key`, `all`, or named groups)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,31}")  # a key's name (keys.py)


@dataclass(frozen=True)
class CacheSharing:
    """`key`: each key resumes only its own prompts; `all`: every key resumes every prompt (one
    tenant); groups: the keys of a group share, a key in no group is alone."""

    mode: str = "key"  # "key", "all" or "groups"
    groups: tuple[tuple[str, ...], ...] = ()

    def tenant(self, key_name: str) -> str:
        """The tenant a key's prompts belong to: the key, its group, or "" (everyone) under `all`."""
        if self.mode == "all":
            return ""
        for group in self.groups:
            if key_name in group:
                return "group:" + "+".join(group)
        return "key:" + key_name


def parse(raw: str) -> CacheSharing:
    """`key`, `all`, or groups of key names: `alice+bob,carol+dave` (a group's names joined by +)."""
    text = raw.strip()
    if text in ("key", "all"):
        return CacheSharing(text)
    groups, seen = [], set()
    for part in (p.strip() for p in text.split(",") if p.strip()):
        names = tuple(sorted(n.strip() for n in part.split("+")))
        for name in names:
            if not _NAME.fullmatch(name):
                raise ValueError(
                    f"{name!r} is not a key name; give key, all, or groups such as alice+bob,carol+dave"
                )
            if name in seen:
                raise ValueError(f"the key name {name!r} is in two groups")
            seen.add(name)
        groups.append(names)
    if not groups:
        raise ValueError("give key, all, or groups of key names such as alice+bob,carol+dave")
    return CacheSharing("groups", tuple(groups))
