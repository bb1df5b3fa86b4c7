"""Drain on SIGTERM: the instance turns not-ready at once, finishes its streams, then stops.

gunicorn's own SIGTERM closes the listeners within a second while streams go on, so
a load balancer's readiness probe, the kubelet's liveness probe and an endpoint
picker's metrics scrape all meet a refused connection: to Kubernetes a dead pod, not a
draining one. Here SIGTERM only raises a flag in memory shared through fork. While it
is up, every worker answers /health/ready with a 503 (the pod leaves the pool), keeps
/health and /metrics answering, refuses new work with a 503 the clients' retries take
elsewhere, and closes each connection after its response. The master stops the usual
way (gunicorn's graceful stop) once no worker holds or awaits a sequence; when
LLM_GRACEFUL_TIMEOUT has passed first, it stops the workers at once. A second SIGTERM
stops gracefully at once.
"""

from __future__ import annotations

import mmap
import struct
import time
from typing import Any

from app.serving.peers import PeerTable

_SINCE = struct.Struct("d")  # Unix time the drain began; 0: serving


class DrainFlag:
    """Whether (and since when) the instance drains, shared by the master and every worker."""

    def __init__(self) -> None:
        self._memory = mmap.mmap(-1, _SINCE.size)  # MAP_SHARED | MAP_ANONYMOUS: shared through fork

    def begin(self, now: float | None = None) -> None:
        _SINCE.pack_into(self._memory, 0, time.time() if now is None else now)

    @property
    def since(self) -> float:
        return float(_SINCE.unpack_from(self._memory, 0)[0])

    @property
    def up(self) -> bool:
        return self.since > 0


def install(server: Any, flag: DrainFlag, table: PeerTable, grace: float) -> None:
    """Master (gunicorn's arbiter `server`): SIGTERM drains instead of closing the listeners.

    The master wakes at least once a second and then manages its workers; that is
    where it checks whether the drain is over.
    """
    drain_flag = flag
    manage_workers = server.manage_workers

    def handle_term() -> None:
        if drain_flag.up:  # told twice: stop now, as gunicorn would have the first time
            raise StopIteration
        drain_flag.begin()
        server.log.info("draining: not ready, new work refused; stopping once the streams end")

    def manage_or_stop() -> None:
        if drain_flag.up:
            busy = sum(peer.load for peer in table.peers() if peer.live)
            if not busy:
                server.log.info("drained: no request is generating")
                raise StopIteration
            if time.time() - drain_flag.since > grace:
                server.log.warning("drain: %d requests still generating after %ss; stopping", busy, grace)
                server.stop(graceful=False)  # the grace is spent: no second one for the workers
                raise StopIteration
        manage_workers()

    server.handle_term = handle_term
    server.manage_workers = manage_or_stop
