"""Which worker serves: each decision of app/serving/routing.py over tables of worker snapshots."""

from __future__ import annotations

import time

import pytest

from app.serving import routing
from app.serving.peers import Peer
from app.settings.models import POOL

NOW_MS = int(time.monotonic() * 1000)


def peer(seat: int, load: int = 0, capacity: int = 4, model: int = 0, ready: bool = True, **kw: int) -> Peer:
    """A live worker (pid = slot + 100) unless `pid` says otherwise."""
    pid = kw.pop("pid", seat + 100)
    pool, used, asleep = bool(kw.pop("pool", 0)), kw.pop("used", NOW_MS), bool(kw.pop("asleep", 0))
    return Peer(seat, pid, load, capacity, model, ready, pool, used, asleep)


def seen(me: int, *peers: Peer, model: int = 0) -> routing.Snapshot:
    return routing.Snapshot(me, model, peers)


@pytest.mark.parametrize(
    ("snapshot", "model", "seat"),
    [
        (seen(0, peer(0), peer(1, model=1)), 1, 1),  # the one holder of model 1
        (seen(0, peer(0), peer(1, model=1, ready=False)), 1, None),  # loading: not yet
        (seen(0, peer(0), peer(1, model=1, pid=-1)), 1, None),  # reserved while it forks
        (seen(0, peer(0), peer(1, 3, model=1), peer(2, 1, model=1)), 1, 2),  # the roomiest
        (seen(0, peer(0), peer(1, 6, model=1), peer(2, 6, model=1)), 1, 1),  # a tie: the lowest slot
        (seen(0, peer(0), peer(1, 9, model=1)), 1, 1),  # full, but the only holder: it queues there
        (seen(1, peer(1, model=1)), 1, None),  # only this worker: never itself
    ],
)
def test_a_model_held_elsewhere_goes_to_its_roomiest_holder(
    snapshot: routing.Snapshot, model: int, seat: int | None
) -> None:
    assert routing.model_holder(snapshot, model) == seat


@pytest.mark.parametrize(
    ("snapshot", "has_room", "seat"),
    [
        (seen(0, peer(0, 4), peer(1, 1)), True, None),  # room here: stay
        (seen(0, peer(0, 4), peer(1, 1)), False, 1),  # none here, a free sequence there
        (seen(0, peer(0, 4), peer(1, 4)), False, None),  # full everywhere: queue here
        (seen(0, peer(0, 4), peer(1, 0, model=1)), False, None),  # another model's worker
        (seen(0, peer(0, 4), peer(1, 0, ready=False)), False, None),  # still loading
        (seen(0, peer(0, 4), peer(1, 3), peer(2, 1)), False, 2),  # the freest
    ],
)
def test_a_full_worker_hands_work_to_a_freer_peer(
    snapshot: routing.Snapshot, has_room: bool, seat: int | None
) -> None:
    assert routing.freer_peer(snapshot, has_room) == seat


@pytest.mark.parametrize(
    ("snapshot", "cached", "chosen"),
    [
        (seen(0, peer(0), peer(1)), {0: 64, 1: 128}, (1, 128, 64)),  # a longer prefix there
        (seen(0, peer(0), peer(1)), {0: 128, 1: 128}, None),  # as long: no hop
        (seen(0, peer(0), peer(1, 4)), {0: 0, 1: 128}, None),  # no free sequence there
        (seen(0, peer(0), peer(1), peer(2)), {0: 0, 1: 64, 2: 192}, (2, 192, 0)),  # the warmest
        (seen(0, peer(0), peer(1, 3), peer(2)), {0: 0, 1: 64, 2: 64}, (2, 64, 0)),  # a tie: more room
        (seen(0, peer(0), peer(1, model=1)), {0: 0, 1: 640}, None),  # another model's cache
    ],
)
def test_a_prompt_goes_where_more_of_it_is_cached(
    snapshot: routing.Snapshot, cached: dict[int, int], chosen: tuple[int, int, int] | None
) -> None:
    assert routing.warmer_peer(snapshot, cached.__getitem__) == chosen


LONG_AGO = NOW_MS - 60_000
JUST_NOW = NOW_MS + 3_600_000  # idle for no time at all, however long the tests take to get here


@pytest.mark.parametrize(
    ("snapshot", "mine", "seat"),
    [
        (seen(0, peer(0), peer(1, model=POOL, pool=1), peer(2, model=POOL, pool=1)), None, 1),  # empty first
        (seen(2, peer(1, model=POOL, pool=1), peer(2, model=POOL, pool=1)), 2, 2),  # this one: no hop
        (seen(0, peer(1, model=3, pool=1, ready=False)), None, None),  # loading already: wait
        (
            seen(0, peer(1, model=2, pool=1, used=LONG_AGO), peer(2, model=4, pool=1, used=LONG_AGO + 1)),
            None,
            1,
        ),
        (seen(0, peer(1, 1, model=2, pool=1, used=LONG_AGO)), None, None),  # serving: never evicted
        (seen(0, peer(1, model=2, pool=1, used=JUST_NOW)), None, None),  # just served: it settles first
        (seen(0, peer(0), peer(1)), None, None),  # no pool at all
    ],
)
def test_an_on_demand_model_loads_on_the_right_pool_worker(
    snapshot: routing.Snapshot, mine: int | None, seat: int | None
) -> None:
    assert routing.loader_for(snapshot, 3, mine) == seat


def test_ready_and_loading_holders_are_told_apart() -> None:
    snapshot = seen(0, peer(0), peer(1, model=3, ready=False), peer(2, model=3))
    assert routing.ready_holder(snapshot, 3) == 2 and routing.loading(snapshot, 3)
    assert routing.ready_holder(seen(0, peer(0)), 3) is None and not routing.loading(seen(0, peer(0)), 3)


@pytest.mark.parametrize(
    ("kinds", "wants", "index"),
    [([False, True], True, 1), ([False, True], False, 0), ([True, False], None, 0), ([True], False, 0)],
)
def test_a_request_naming_no_model_takes_the_first_that_fits(
    kinds: list[bool], wants: bool | None, index: int
) -> None:
    assert routing.first_fitting(kinds, wants) == index


@pytest.mark.parametrize(
    ("snapshot", "seat"),
    [
        (seen(0, peer(0, asleep=1), peer(1, 1)), 1),  # awake with room: it serves, nothing wakes
        (seen(0, peer(0, asleep=1), peer(1, 4)), None),  # awake but full: wake this one
        (seen(0, peer(0, asleep=1), peer(1, asleep=1)), None),  # all asleep: wake this one
        (seen(0, peer(0, asleep=1), peer(1, 3), peer(2, 1)), 2),  # the roomiest awake one
        (seen(0, peer(0, asleep=1), peer(1, model=1)), None),  # another model's worker: no
        (seen(0, peer(0, asleep=1), peer(1, ready=False)), None),  # still loading: no
    ],
)
def test_a_request_landing_on_a_sleeping_worker_goes_to_an_awake_one_with_room(
    snapshot: routing.Snapshot, seat: int | None
) -> None:
    assert routing.awake_peer(snapshot, 0) == seat


def test_relays_prefer_an_awake_worker_to_a_roomier_sleeping_one() -> None:
    snapshot = seen(0, peer(0), peer(1, 0, model=1, asleep=1), peer(2, 3, model=1))
    assert routing.model_holder(snapshot, 1) == 2
    assert routing.model_holder(seen(0, peer(0), peer(1, 0, model=1, asleep=1)), 1) == 1  # else it wakes
    full = seen(0, peer(0, 4), peer(1, 0, asleep=1), peer(2, 2))
    assert routing.freer_peer(full, has_room=False) == 2


def test_a_prompt_cache_key_has_one_home_every_worker_agrees_on() -> None:
    workers = [peer(seat) for seat in range(4)]
    homes = {}
    for key in (f"user-{n}" for n in range(40)):
        asked_from = {routing.keyed_peer(seen(me, *workers), key, lambda _: 0) for me in range(4)}
        home = (asked_from - {None}).pop()
        assert asked_from == {home, None}  # the others send it there; the home itself keeps it
        homes[key] = home
    assert set(homes.values()) == {0, 1, 2, 3}  # keys spread over the workers
    # A worker leaving moves only the keys it was home to.
    without_3 = [w for w in workers if w.seat != 3]
    for key, home in homes.items():
        moved = {routing.keyed_peer(seen(me, *without_3), key, lambda _: 0) for me in range(3)} - {None}
        assert home == 3 or moved == {home}


def test_a_keys_home_without_room_or_with_less_cached_is_passed_over() -> None:
    key = next(
        k
        for k in (f"k{n}" for n in range(100))
        if routing.keyed_peer(seen(0, peer(0), peer(1)), k, lambda _: 0)
    )
    assert routing.keyed_peer(seen(0, peer(0), peer(1)), key, lambda _: 0) == 1
    assert routing.keyed_peer(seen(0, peer(0), peer(1, 4)), key, lambda _: 0) is None  # full
    assert routing.keyed_peer(seen(0, peer(0), peer(1)), key, lambda seat: 64 if seat == 0 else 0) is None
    assert routing.keyed_peer(seen(0, peer(0), peer(1, ready=False)), key, lambda _: 0) is None  # loading
