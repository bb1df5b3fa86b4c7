"""An answer read as it grows, as blocks (reasoning, text, each call): how Anthropic and Responses stream."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from app.chat_formats.answer import AnswerReader, DeltaStream


@dataclass
class Block:
    """One block of the answer: `reasoning`, `content` or `call` (with its id and name)."""

    kind: str
    position: int  # among the answer's blocks, from 0
    text: str = ""  # all of it so far (a call's: its arguments)
    call_id: str = ""
    name: str = ""


@dataclass(frozen=True)
class BlockEvent:
    """A block opens (`start`), grows by `piece` (`delta`) or is finished (`stop`)."""

    kind: str
    block: Block
    piece: str = ""


class BlockStream:
    """Reads one answer chunk by chunk; each new kind of delta closes the open block and opens another."""

    def __init__(self, reader: AnswerReader) -> None:
        self.deltas = DeltaStream(reader)
        self.blocks: list[Block] = []
        self._text = ""
        self._calls: dict[int, Block] = {}

    def feed(self, text: str, final: bool) -> Iterator[BlockEvent]:
        """The events `text` (more of the answer) adds; `final` closes the last block."""
        self._text += text
        for delta in self.deltas.update(self._text, final):
            if delta.kind == "arguments":
                block = self._calls[delta.index]
                block.text += delta.text
                yield BlockEvent("delta", block, delta.text)
                continue
            current = self.blocks[-1] if self.blocks else None
            if current is None or delta.kind == "call" or current.kind != delta.kind:
                if current is not None:
                    yield BlockEvent("stop", current)
                current = Block(delta.kind, len(self.blocks), call_id=delta.id, name=delta.name)
                self.blocks.append(current)
                if delta.kind == "call":
                    self._calls[delta.index] = current
                yield BlockEvent("start", current)
            if delta.text:
                current.text += delta.text
                yield BlockEvent("delta", current, delta.text)
        if final and self.blocks:
            yield BlockEvent("stop", self.blocks[-1])
