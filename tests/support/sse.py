"""The one Server-Sent-Event parser of the tests: strict about framing, for named and unnamed events.

Every test that reads a stream's events reads them here, so what "well framed" means is
written once: `\n` line ends, one blank line after each event, ASCII only, an optional
`event:` line before exactly one `data:` line, and `: keep-alive` comments between events.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_FRAME = re.compile(rb"(?:event: ([\x21-\x7e]+)\n)?data: ([\x20-\x7e]*)\n\n|: keep-alive\n\n")


@dataclass(frozen=True)
class Event:
    """One event: its name (None for an unnamed one) and its data line's text."""

    name: str | None
    data: str

    @property
    def done(self) -> bool:
        return self.data == "[DONE]"

    def json(self) -> Any:
        return json.loads(self.data)


def _frames(body: bytes | str) -> list[re.Match[bytes]]:
    raw = body.encode() if isinstance(body, str) else body
    frames = list(_FRAME.finditer(raw))
    assert b"".join(m.group(0) for m in frames) == raw, f"a malformed frame in {raw[:2000]!r}"
    return frames


def frames(body: bytes | str) -> list[bytes]:
    """Every frame of `body` (events and keep-alive comments), asserting nothing else is there."""
    return [frame.group(0) for frame in _frames(body)]


def parse(body: bytes | str) -> list[Event]:
    """The events of a whole stream body, keep-alive comments left out; every byte must be well framed."""
    return [
        Event(frame.group(1).decode() if frame.group(1) else None, frame.group(2).decode())
        for frame in _frames(body)
        if frame.group(2) is not None
    ]


def payloads(body: bytes | str) -> list[Any]:
    """The JSON of every event but `[DONE]`."""
    return [event.json() for event in parse(body) if not event.done]


def named(body: bytes | str) -> list[tuple[str, Any]]:
    """(name, JSON) of every event of a stream whose events are all named (Responses, Messages)."""
    events = parse(body)
    assert all(event.name is not None for event in events), events
    return [(event.name or "", event.json()) for event in events]
