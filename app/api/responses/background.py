"""Background responses (`background: true`): generated with no connection held, every event kept.

The POST answers at once with the queued Response, or streams its events as they are
kept. A client polls `GET /v1/responses/{id}`, or resumes the stream with
`?stream=true&starting_after=N`, on any worker or host, since both read the store.
`POST .../cancel` marks it cancelled; the run looks every half second and stops.
Events are written in small batches (a tenth of a second), so a resumed stream lags
the generation by at most that, and a database is not asked to commit every token.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from flask import Response, current_app, g, jsonify

from app.api.generation.loop import HungUp, chunks
from app.api.http import sse, store_access
from app.api.http.errors import APIError, InvalidRequestError, ServerError, from_engine
from app.api.responses.history import Recorder
from app.api.responses.presenter import ResponsesPresenter
from app.engine.engine import Engine
from app.engine.errors import EngineError
from app.engine.types import ChoicePlan, Chunk
from app.serving import detached
from app.settings.config import Config
from app.settings.current import current_config
from app.store.responses import EventLog, ResponseStore
from app.telemetry.request_stats import RequestStats

log = logging.getLogger(__name__)

TERMINAL = ("response.completed", "response.incomplete", "response.failed")
RUNNING = ("queued", "in_progress")
FLUSH_EVERY = 0.1  # seconds between writes of events
CANCEL_CHECK = 0.5  # seconds between looks at the stored status
POLL = 0.25  # a stream reader's wait for events written by another process
ORPHAN_GRACE = 10.0  # seconds past its longest possible run (clocks, last writes) before a run counts as lost
LOST = "The worker running this background response stopped before it finished; create it again."
_written: dict[str, threading.Event] = {}  # runs in this process: set when events were written


def start(
    engine: Engine,
    stream: bool,
    requests: list[ChoicePlan],
    presenter: ResponsesPresenter,
    recorder: Recorder,
) -> Response:
    """Admit the generation (a full queue is a 429 now), keep the queued Response, run it apart."""
    store = store_access.current()
    if store is None or recorder.responses is None:
        raise InvalidRequestError(
            "This server keeps no responses (LLM_STORE=off), so none can run in the background.",
            param="background",
        )
    generation = engine.submit(requests)
    queued = presenter.header.render("queued")
    try:
        recorder.save(queued)
    except BaseException:
        generation.close()  # the store is away: its sequence goes back at once
        raise
    run = _Run(presenter, recorder, store.events, store.responses, queued["id"], _handoff())
    return _started(stream, run, lambda: run.run(generation), queued)


def start_loop(
    stream: bool,
    presenter: ResponsesPresenter,
    recorder: Recorder,
    events: Callable[[Callable[[], bool], RequestStats], Iterator[bytes]],
) -> Response:
    """Run a loop of generations (the mcp tools') in the background: `events(cancelled, stats)` makes
    its events, looking at `cancelled()` as it goes. Kept queued first, then run apart."""
    store = store_access.current()
    if store is None or recorder.responses is None:
        raise InvalidRequestError(
            "This server keeps no responses (LLM_STORE=off), so none can run in the background.",
            param="background",
        )
    queued = presenter.header.render("queued")
    recorder.save(queued)
    run = _Run(presenter, recorder, store.events, store.responses, queued["id"], _handoff())
    app = current_app._get_current_object()  # type: ignore[attr-defined]  # the thread plans steps in it

    def looped() -> None:
        with app.app_context():
            run.run_loop(events)

    return _started(stream, run, looped, queued)


def _handoff() -> detached.Handoff:
    # The key's place and tokens are settled when the run ends, not when this POST does.
    g.handoff = handoff = detached.Handoff()
    return handoff


def _started(stream: bool, run: _Run, target: Callable[[], None], queued: dict[str, Any]) -> Response:
    _written[run.response_id] = threading.Event()
    # Under gevent's patching, a greenlet that outlives this request; a stopping worker waits
    # for it as it waits for open connections (app/serving/detached.py).
    detached.start(threading.Thread(target=target, daemon=True, name=f"bg-{run.response_id}"))
    if stream:  # the events as they are kept; else the queued Response at once
        store = store_access.current()
        assert store is not None
        keepalive = current_config().sse_keepalive
        return sse.stream_response(tail(store.events, store.responses, run.response_id, -1, keepalive))
    return jsonify(queued)


class _Run:
    """One background generation: its events written in batches, its final Response kept after them."""

    def __init__(
        self,
        presenter: ResponsesPresenter,
        recorder: Recorder,
        events: EventLog,
        responses: ResponseStore,
        rid: str,
        handoff: detached.Handoff,
    ) -> None:
        self.presenter, self.recorder, self.events, self.responses = presenter, recorder, events, responses
        self.response_id, self.handoff = rid, handoff
        self.pending: list[dict[str, Any]] = []
        self.flushed = time.monotonic()
        self.final: dict[str, Any] | None = None
        # The final Response is kept only once its events are: a reader that sees it finished
        # finds every event already there.
        presenter.on_final = self._hold_final
        presenter.on_event = self._add

    def run(self, generation: Any) -> None:
        stats = RequestStats(prompt_tokens=len(generation.plans[0].prompt_tokens))
        try:
            self._events(self.presenter.events(self._watched(chunks(generation, stats), generation)))
        finally:
            generation.close()
            self._finish()
            self.handoff.end(stats.prompt_tokens + stats.completion_tokens)

    def run_loop(self, events: Callable[[Callable[[], bool], RequestStats], Iterator[bytes]]) -> None:
        stats = RequestStats()
        looked = [time.monotonic(), False]

        def cancelled() -> bool:  # a look at the stored status now and then
            if not looked[1] and time.monotonic() - float(looked[0]) > CANCEL_CHECK:
                looked[0], looked[1] = time.monotonic(), self._stored_status() == "cancelled"
            return bool(looked[1])

        try:
            self._events(events(cancelled, stats))
        finally:
            self._finish()
            self.handoff.end(stats.prompt_tokens + stats.completion_tokens)

    def _events(self, events: Iterator[bytes]) -> None:
        """Run the events through (each kept by the presenter's on_event); a failure is the Response's."""
        try:
            for _ in events:
                pass
        except HungUp:  # cancelled: keep what was written so far, as cancelled
            self.final = self.presenter.header.render("cancelled", self.presenter.output)
        except (APIError, EngineError) as exc:
            self.presenter.failure(exc if isinstance(exc, APIError) else from_engine(exc))
        except Exception:  # noqa: BLE001 - a background run has nobody else to tell
            log.exception("a background response failed")
            self.presenter.failure(ServerError("The server had an error while generating; please retry."))

    def _watched(self, chunks: Iterator[Chunk | None], generation: Any) -> Iterator[Chunk | None]:
        """The chunks, with a look at the stored status now and then: a cancel stops the generation."""
        looked = time.monotonic()
        for chunk in chunks:
            if time.monotonic() - looked > CANCEL_CHECK:
                looked = time.monotonic()
                if self._stored_status() == "cancelled":
                    generation.cancel()
            yield chunk

    def _stored_status(self) -> str | None:
        try:
            return self.responses.status(self.response_id)
        except Exception:  # noqa: BLE001 - the store away for a moment: look again later
            return None

    def _add(self, event: dict[str, Any]) -> None:
        begins = event["type"] == "response.in_progress" and "prompt_progress" not in event
        if begins and self._stored_status() != "cancelled":
            try:
                self.recorder.save(event["response"])  # a poller sees it start
            except Exception:  # noqa: BLE001 - logged by the store; the run goes on
                pass
        if event["type"] in TERMINAL and self._stored_status() == "cancelled":
            # Cancelled after the last look: the cancel stands (its client was told so), and the
            # stream ends without a last word, as a cancelled one does.
            self.final = self.presenter.header.render("cancelled", self.presenter.output)
            self._flush()
            return
        self.pending.append(event)
        if event["type"] in TERMINAL or time.monotonic() - self.flushed >= FLUSH_EVERY:
            self._flush()

    def _flush(self) -> None:
        if self.pending:
            events, self.pending = self.pending, []
            try:
                for event in events:
                    self.events.append(self.response_id, event)
            except Exception:  # noqa: BLE001 - logged by the store; the final Response is still kept
                pass
        self.flushed = time.monotonic()
        wake = _written.get(self.response_id)
        if wake is not None:
            wake.set()

    def _hold_final(self, response: dict[str, Any]) -> None:
        if self.final is None or self.final["status"] != "cancelled":
            self.final = response

    def _finish(self) -> None:
        self._flush()
        try:
            if self.final is not None:
                self.recorder(self.final)
        except Exception:  # noqa: BLE001 - the store is away: logged there; nobody waits on this run
            pass
        finally:
            wake = _written.pop(self.response_id, None)
            if wake is not None:
                wake.set()


def deadline(response: dict[str, Any], config: Config) -> float | None:
    """When a background response must have finished, if it runs at all: its wait in the queue and
    its generation are both bounded (None when LLM_MAX_GENERATION_SECONDS=0 lifts the bound)."""
    if not config.max_generation_seconds:
        return None
    return float(response["created_at"]) + config.queue_timeout + config.max_generation_seconds + ORPHAN_GRACE


def settled(response: dict[str, Any], config: Config) -> dict[str, Any]:
    """The Response as a client should see it: one still running past its deadline has lost its worker."""
    due = deadline(response, config)
    if response.get("status") in RUNNING and due is not None and time.time() > due:
        error = {"code": "server_error", "message": LOST}
        return {**response, "status": "failed", "error": error}
    return response


def tail(
    events: EventLog,
    responses: ResponseStore,
    response_id: str,
    after: int,
    keepalive: float,
    due: float | None = None,
) -> Iterator[bytes]:
    """The events numbered above `after`, then each as it is written, until the last (or a cancel).

    A generator that runs after the view has returned: it is given all it needs.
    """
    quiet_since = time.monotonic()
    while True:
        with store_access.reachable():
            batch = events.after(response_id, after)
        for event in batch:
            yield sse.named_event(event["type"], event)
            after = event["sequence_number"]
            if event["type"] in TERMINAL:
                return
        if batch:
            quiet_since = time.monotonic()
            continue
        with store_access.reachable():
            if responses.status(response_id) not in RUNNING and not events.after(response_id, after):
                return  # cancelled: nothing more will come
        if due is not None and time.time() > due:
            return  # its worker stopped before it finished (see `settled`)
        wake = _written.get(response_id)
        if wake is not None:
            wake.wait(POLL)
            wake.clear()
        else:
            time.sleep(POLL)  # written by another process: look again shortly
        if keepalive and time.monotonic() - quiet_since >= keepalive:
            quiet_since = time.monotonic()
            yield sse.KEEPALIVE
