"""Streams read in threads, each event noted with its arrival time: to see how streams interleave."""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Event:
    at: float
    data: dict[str, Any]


@dataclass
class RecordedStream:
    """One streamed request, read in its own thread; `events` grows as they arrive."""

    port: int
    path: str
    body: dict[str, Any]
    sent: float = 0.0
    status: int = 0
    events: list[Event] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    first_text: threading.Event = field(default_factory=threading.Event)
    _connection: http.client.HTTPConnection | None = None

    def start(self) -> RecordedStream:
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def _read(self) -> None:
        self._connection = connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        try:
            self.sent = time.monotonic()
            connection.request("POST", self.path, json.dumps(self.body), {"Content-Type": "application/json"})
            response = connection.getresponse()
            self.status = response.status
            for line in response:
                if line.startswith(b"data: {"):
                    event = Event(time.monotonic(), json.loads(line[6:]))
                    self.events.append(event)
                    if text_of(event.data):
                        self.first_text.set()
        except (OSError, http.client.HTTPException):
            pass  # hung up on purpose, or the server dropped us: the test looks at what arrived
        finally:
            connection.close()
            self.done.set()

    def hang_up(self) -> None:
        """Close the connection mid-stream, as a client that leaves does."""
        if self._connection is not None and self._connection.sock is not None:
            self._connection.sock.shutdown(2)

    def text_times(self) -> list[float]:
        """When each piece of text arrived."""
        return [e.at for e in self.events if text_of(e.data)]

    def text(self) -> str:
        return "".join(text_of(e.data) for e in self.events)

    def finish_reasons(self) -> list[str]:
        return [
            c["finish_reason"] for e in self.events for c in e.data.get("choices", []) if c["finish_reason"]
        ]

    def errors(self) -> list[dict[str, Any]]:
        return [e.data["error"] for e in self.events if "error" in e.data]

    def usage(self) -> dict[str, Any] | None:
        return next((e.data["usage"] for e in reversed(self.events) if e.data.get("usage")), None)


def text_of(chunk: dict[str, Any]) -> str:
    """The text a chat or text-completion chunk carries."""
    texts = []
    for choice in chunk.get("choices", []):
        texts.append(choice.get("text") or (choice.get("delta") or {}).get("content") or "")
    return "".join(texts)


def streams(port: int, path: str, bodies: list[dict[str, Any]]) -> list[RecordedStream]:
    """Start one recorded stream per body, all at once."""
    return [RecordedStream(port, path, {**body, "stream": True}).start() for body in bodies]
