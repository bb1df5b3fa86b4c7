"""Turn generated token bytes into text pieces that never split a character or leak a stop string."""

from __future__ import annotations

import codecs


class TextAssembler:
    """Incremental UTF-8 decoding plus stop-string hold-back.

    Text that could still be the start of a stop string is held back until the next
    token settles it, so no part of a stop string is ever sent, and a streamed
    response concatenates to exactly the non-streamed text.
    """

    def __init__(self, stop: list[str], n_indent: int = 0) -> None:
        self._stop = [s for s in stop if s]
        self._indent = _IndentRule(n_indent)
        self._cut_at: int | None = None  # where the pending text ends short of its indentation
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self.stopped = False
        self.matched: str | None = None  # the stop string that ended the text
        # Unarmed, stop strings are not looked for (min_tokens): text passes straight on.
        self.armed = True

    def feed(self, piece: bytes) -> str:
        """Add one token's bytes; return the text that is now safe to send."""
        decoded = self._decoder.decode(piece)
        cut = self._indent.cut(decoded)
        if cut is not None and self._cut_at is None:
            self._cut_at = len(self._pending) + cut
        self._pending += decoded
        return self._release()

    @property
    def cut_short(self) -> bool:
        """Whether the text ended at a line indented less than `n_indent` (llama-server's limit)."""
        return self.stopped and self.matched is None

    def finish(self) -> str:
        """Return the text still held back once generation has ended."""
        if not self.stopped:
            self._pending += self._decoder.decode(b"", final=True)
        text = self._release(final=True)
        self._pending = ""
        return text

    def _release(self, final: bool = False) -> str:
        if self.stopped:
            return ""
        if not self.armed:
            text, self._pending = self._pending, ""
            return text
        hit = self._first_stop()
        if self._cut_at is not None and (hit is None or hit[0] > self._cut_at):
            self.stopped = True
            text, self._pending = self._pending[: self._cut_at], ""
            return text
        if hit is not None:
            cut, self.matched = hit
            self.stopped = True
            text, self._pending = self._pending[:cut], ""
            return text
        keep = 0 if final else self._longest_stop_prefix_suffix()
        end = len(self._pending) - keep
        text, self._pending = self._pending[:end], self._pending[end:]
        return text

    def _first_stop(self) -> tuple[int, str] | None:
        """Where the earliest stop string starts in the pending text, and which one it is."""
        hits = [(i, s) for s in self._stop if (i := self._pending.find(s)) >= 0]
        return min(hits) if hits else None

    def _longest_stop_prefix_suffix(self) -> int:
        """Length of the longest tail of the pending text that begins some stop string."""
        longest = 0
        for stop in self._stop:
            for size in range(min(len(stop) - 1, len(self._pending)), longest, -1):
                if self._pending.endswith(stop[:size]):
                    longest = size
                    break
        return longest


class _IndentRule:
    """llama-server's `n_indent` (for /infill): after the first line, a line whose first character
    other than a space or tab (or its newline) comes after fewer than `n_indent` of them ends the
    text before it."""

    def __init__(self, n_indent: int) -> None:
        self.n_indent = n_indent
        self._at_line_start = False
        self._indent = 0

    def cut(self, text: str) -> int | None:
        """Where in `text` (the next decoded piece) the text must end, if it must."""
        if self.n_indent <= 0:
            return None
        for offset, char in enumerate(text):
            # A line's first character other than a space or a tab, a newline too (an empty line
            # ends the text as a short one: llama-server's check).
            if self._at_line_start and char not in " \t":
                self._at_line_start = False
                if self._indent < self.n_indent:
                    return offset
            if char == "\n":
                self._at_line_start, self._indent = True, 0
            elif self._at_line_start:
                self._indent += 1
        return None
