"""Images and audio encoded in a native thread of their own, so that the batcher goes on stepping.

Encoding an image runs the projector's whole vision encoder: seconds for a real one on a CPU,
during which llama-server's other slots wait (it encodes in its main loop). Here the batcher
hands the run over and its other sequences keep generating; the choice that brought the
image waits, and the batcher decodes its embeddings once they are back. The two share the
CPU's cores meanwhile: streams slow down instead of stopping.
"""

from __future__ import annotations

import queue
from collections.abc import Callable

import numpy as np

from app.engine.media import MediaRun
from app.engine.native import NativeQueue, start_thread

Encoded = Callable[[np.ndarray | None], None]


class MediaEncoder:
    """One thread that encodes runs in the order they come, and says when each is done."""

    def __init__(self, encode: Callable[[MediaRun], np.ndarray | None], wake: Callable[[], None]) -> None:
        self._encode = encode
        self._wake = wake  # lets a batcher waiting for nothing else go on
        self._inbox: queue.SimpleQueue[tuple[MediaRun, Encoded] | None] = NativeQueue()
        self._stopped: queue.SimpleQueue[bool] = NativeQueue()
        self._running = False

    def submit(self, run: MediaRun, done: Encoded) -> None:
        """Encode `run`, then call `done` with its embeddings (None: it failed), in this encoder's thread."""
        if not self._running:
            self._running = True
            start_thread(self._loop, ())
        self._inbox.put((run, done))

    def close(self) -> None:
        """Stop once the run in hand is encoded (the projector may be freed after this returns)."""
        if self._running:
            self._inbox.put(None)
            self._stopped.get()
            self._running = False

    def _loop(self) -> None:
        while (item := self._inbox.get()) is not None:
            run, done = item
            try:
                embeddings = self._encode(run)
            except Exception:  # noqa: BLE001 - a failed encode fails its choice, not the thread
                embeddings = None
            done(embeddings)
            self._wake()
        self._stopped.put(True)
