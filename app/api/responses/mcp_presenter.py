"""The Responses API's presenter over a loop of generations (the mcp tools'): one Response, its usage
summed over every step; and the stream's guard, which ends it with response.failed on an error."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from app.api.generation.loop import ChoiceResult, HungUp
from app.api.http.errors import APIError, from_engine
from app.api.responses import objects
from app.api.responses.objects import ResponseHeader
from app.api.responses.presenter import ResponsesPresenter
from app.engine.errors import EngineError


def guarded(events: Iterator[bytes], presenter: ResponsesPresenter) -> Iterator[bytes]:
    """The stream's events; an error after the 200 ends it with response.failed, a hang-up quietly."""
    try:
        yield from events
    except HungUp:
        return
    except (APIError, EngineError) as exc:
        yield presenter.failure(exc if isinstance(exc, APIError) else from_engine(exc))


class LoopPresenter(ResponsesPresenter):
    """One Response over several generations: usage summed over them, the final object kept."""

    def __init__(self, header: ResponseHeader, on_final: Any) -> None:
        super().__init__(header, 0, None, on_final=on_final)  # type: ignore[arg-type]  # reader: per step
        self.usage = [0, 0, 0]  # input, output and cached tokens over every step
        self.final: dict[str, Any] | None = None

    def _final(self, output: list[dict[str, Any]], result: ChoiceResult) -> dict[str, Any]:
        status = "incomplete" if result.finish_reason == "length" else "completed"
        tokens = objects.usage(self.usage[0], self.usage[1], self.usage[2])
        self.final = self._finished(self.header.render(status, output, tokens))
        return self.final

    def item_event(self, kind: str, **fields: Any) -> bytes:
        return self._event(kind, **fields)
