"""Turn generated token bytes into text pieces that never split a character or leak a stop string."""

from __future__ import annotations

import codecs


class TextAssembler:
    """Incremental UTF-8 decoding plus stop-string hold-back.

    Text that could still be the start of a stop string is held back until the next
    token settles it, so no part of a stop string is ever sent, and a streamed
    response concatenates to exactly the non-streamed text.
    """

    def __init__(self, stop: list[str]) -> None:
        self._stop = [s for s in stop if s]
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self.stopped = False
        self.matched: str | None = None  # the stop string that ended the text
        # Unarmed, stop strings are not looked for (min_tokens): text passes straight on.
        self.armed = True

    def feed(self, piece: bytes) -> str:
        """Add one token's bytes; return the text that is now safe to send."""
        self._pending += self._decoder.decode(piece)
        return self._release()

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
