"""Each worker's batch runner: takes batch lines while its engine has room to spare, one per sequence.

Batch work only fills what interactive work leaves: a line is taken only while a sequence
beyond one kept free stays idle and nothing waits, and the engine takes a running line's
sequence back when an interactive request would otherwise wait (the line goes back to
the queue and runs again later). Every worker of every host sharing the store runs the
same loop, so a batch runs on whichever is free, and on the others when one dies.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from typing import Any

from flask import Flask

from app import workers
from app.api.batches import jobs
from app.api.batches.lines import answered_line, error_line
from app.api.http.in_process import dispatch
from app.serving import detached
from app.serving.internal import InternalCall
from app.settings.config import Config
from app.settings.current import config_of
from app.store.batch_lines import Claimed
from app.store.errors import StoreUnavailableError
from app.store.opening import Store

log = logging.getLogger(__name__)

POLL = 1.0  # seconds between looks for work when there is none
TEND_EVERY = 1.0  # seconds between looks at batches to split or finalize
MAX_ATTEMPTS = 3  # a line whose worker died this often is answered with an error, not run again
LOST = "The worker running this request stopped {n} times before it finished; it is not run again."


class BatchRunner:
    """Runs batch lines in this worker (started once per worker process, for its life)."""

    def __init__(self, app: Flask, store: Store, engine: Any, config: Config) -> None:
        self.app, self.store, self.engine, self.config = app, store, engine, config
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.models = (config.model.id,)
        self.running: dict[tuple[str, int], InternalCall] = {}
        self.wake = threading.Event()
        self._keys = {key.name: key for _, key in app.extensions.get("api_keys", ())}
        self._tended = self._renewed = 0.0

    def _draining(self) -> bool:
        state = workers.of(self.app)
        return state is not None and state.draining

    def start(self) -> None:
        threading.Thread(target=self._loop, daemon=True, name="batch-runner").start()

    def _loop(self) -> None:
        while not self.engine.ready:
            time.sleep(POLL)
        failing = False
        while True:
            # A stopping worker takes no new line, but keeps the leases of those it finishes.
            taking = not (self._draining() or detached.stopping())
            if not taking and not self.running:
                return
            try:
                self._step(taking)
                failing = False
            except StoreUnavailableError:
                failing = True  # logged by the store; try again at the next tick
            except Exception:  # noqa: BLE001 - the loop must outlive any one batch's trouble
                if not failing:
                    log.exception("the batch runner failed; it tries again")
                failing = True
            self.wake.wait(POLL)
            self.wake.clear()

    def _step(self, taking: bool) -> None:
        now = time.monotonic()
        lease = self.config.batch_lease
        if self.running and now - self._renewed >= lease / 3:
            self._renewed = now
            self.store.batch_lines.renew(self.worker, lease)
            self._stop_cancelled()
        if not taking:
            return
        if now - self._tended >= TEND_EVERY:
            self._tended = now
            jobs.tend(self.store, self.worker, self._route)
        while self._has_room():
            line = self.store.batch_lines.claim(self.worker, lease, self.models)
            if line is None:
                return
            call = InternalCall(self._keys.get(line.owner))
            self.running[(line.batch_id, line.line_no)] = call
            thread = threading.Thread(target=self._run, args=(line, call), daemon=True, name="batch-line")
            detached.start(thread)  # a stopping worker finishes the lines it holds

    def _has_room(self) -> bool:
        """A sequence beyond one kept for interactive work is idle, and no request waits."""
        keep = 1 if self.engine.parallel > 1 else 0
        spare = self.engine.parallel - self.engine.load - keep
        return bool(self.engine.has_room) and spare > 0 and len(self.running) < self.engine.parallel - keep

    def _run(self, line: Claimed, call: InternalCall) -> None:
        lines = self.store.batch_lines
        try:
            if line.attempts > MAX_ATTEMPTS:
                message = LOST.format(n=MAX_ATTEMPTS)
                result, failed = error_line(line.custom_id, "worker_lost", message, line.line_no), True
            elif self._keys and call.key is None:
                message = "The API key that created this batch is no longer configured on this server."
                body = {
                    "error": {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}
                }
                result, failed = answered_line(line.custom_id, 401, "", body), True
            else:
                if line.attempts > 1:
                    log.info("batch %s line %d runs again (attempt %d): the worker that had it stopped",
                             line.batch_id, line.line_no, line.attempts)  # fmt: skip
                status, request_id, body = dispatch(self.app, line.endpoint, line.body, call)
                if call.preempted or status == 499:  # made way, or its batch is being cancelled
                    lines.release(line, self.worker)
                    log.info("batch %s line %d goes back to the queue unanswered", *line_at(line))
                    return
                result, failed = answered_line(line.custom_id, status, request_id, body), status >= 400
            if not lines.finish(line, self.worker, result, failed):
                log.warning(
                    "batch %s line %d: its lease ran out while it ran; its answer is dropped", *line_at(line)
                )
        except StoreUnavailableError:
            pass  # logged by the store: the lease runs out, and the line runs again
        except Exception:  # noqa: BLE001 - its lease runs out, and another attempt follows
            log.exception("batch %s line %d failed to run", *line_at(line))
        finally:
            self.running.pop((line.batch_id, line.line_no), None)
            self.wake.set()

    def _stop_cancelled(self) -> None:
        """Cancel this worker's lines of batches being cancelled (each goes back unanswered)."""
        cancelling = {due.id for due in self.store.batches.active() if due.status == "cancelling"}
        for (batch_id, _), call in list(self.running.items()):
            if batch_id in cancelling:
                call.cancel()

    def _route(self, model: Any, endpoint: str) -> str:
        """The model whose workers run a line: the one it names, or the endpoint's default (as the
        API picks it); "" (any worker: it answers the error) for a model this server does not serve
        or loads on demand (batches run on the models loaded at start-up)."""
        served = self.config.models
        if model is None:
            embeds = endpoint == "/v1/embeddings"
            return next((spec.id for spec in served if spec.embedding == embeds), served[0].id)
        return next((spec.id for spec in served if spec.answers_to(model) and not spec.on_demand), "")


def start(app: Flask) -> None:
    """Run batches in this worker, if the store is on."""
    store, engine = app.extensions.get("store"), app.extensions.get("engine")
    # A pool worker's model comes and goes: lines for on-demand models wait for a worker holding
    # them at start-up (none does), so batches name pinned models (see README).
    if store is not None and engine is not None and "model_holder" not in app.extensions:
        runner = BatchRunner(app, store, engine, config_of(app))
        app.extensions["batch_runner"] = runner
        runner.start()


def line_at(line: Claimed) -> tuple[str, int]:
    """Where a line is, for log lines."""
    return line.batch_id, line.line_no
