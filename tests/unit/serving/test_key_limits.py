"""Per-key limits in shared memory: generations at once, requests and tokens over a sliding minute."""

from __future__ import annotations

import os

from app.serving.key_limits import KeyLimits, duration
from app.settings.keys import ApiKey


def test_generations_at_once_are_counted_over_every_worker_and_cleared_with_a_dead_one() -> None:
    limits = KeyLimits(workers=3)
    key = ApiKey("team", "sk", concurrency=2)
    assert limits.admit(0, key, now=100).allowed and limits.admit(2, key, now=100).allowed
    refused = limits.admit(1, key, now=100)
    assert not refused.allowed and refused.retry_after == 1 and refused.headers["Retry-After"] == "1"
    limits.release(0, key)
    assert limits.admit(1, key, now=100).allowed
    limits.clear_worker(2)  # its worker was killed holding a generation: the place comes back
    assert limits.running(key) == 1 and limits.admit(0, key, now=100).allowed


def test_requests_per_minute_slide_and_say_when_to_retry() -> None:
    limits = KeyLimits(workers=1)
    key = ApiKey("team", "sk", rpm=3)
    seen = [limits.admit(0, key, now=t) for t in (1000, 1010, 1020)]
    assert [v.headers["x-ratelimit-remaining-requests"] for v in seen] == ["2", "1", "0"]
    for verdict in seen:
        limits.release(0, key)
        assert verdict.headers["x-ratelimit-limit-requests"] == "3"
    refused = limits.admit(0, key, now=1030)
    assert not refused.allowed and refused.retry_after == 30  # when the request of second 1000 leaves
    assert refused.headers["x-ratelimit-reset-requests"] == "30s"
    assert limits.admit(0, key, now=1060).allowed  # a minute after the first


def test_tokens_per_minute_count_what_requests_used() -> None:
    limits = KeyLimits(workers=1)
    key = ApiKey("team", "sk", tpm=100)
    assert limits.admit(0, key, now=50).allowed
    limits.count_tokens(key, 70, now=50)
    second = limits.admit(0, key, now=55)
    assert second.allowed and second.headers["x-ratelimit-remaining-tokens"] == "30"
    limits.count_tokens(key, 40, now=55)
    refused = limits.admit(0, key, now=56)
    assert not refused.allowed and "100 tokens per minute" in refused.reason
    assert refused.retry_after == 54  # second 50's 70 tokens leave at 110: 40 left, under 100


def test_other_keys_are_counted_apart() -> None:
    limits = KeyLimits(workers=1)
    one, other = ApiKey("one", "sk-1", rpm=1), ApiKey("other", "sk-2", rpm=1)
    assert limits.admit(0, one, now=5).allowed and not limits.admit(0, one, now=5).allowed
    assert limits.admit(0, other, now=5).allowed


def test_workers_in_other_processes_share_the_counts_and_never_both_take_the_last_place() -> None:
    limits = KeyLimits(workers=4)
    key = ApiKey("team", "sk", rpm=50)
    children = []
    for worker in range(4):
        pid = os.fork()
        if pid == 0:  # a worker: tells how many of its 30 tries got in
            os._exit(sum(limits.admit(worker, key, now=7).allowed for _ in range(30)))
        children.append(pid)
    admitted = sum(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children)
    assert admitted == 50  # 120 tries, exactly the limit in
    last = limits.admit(0, key, now=7)
    assert not last.allowed and last.headers["x-ratelimit-remaining-requests"] == "0"


def test_openai_duration_format() -> None:
    seconds = (0, 0.2, 1, 59, 60, 61, 360)
    assert [duration(s) for s in seconds] == ["0s", "1s", "1s", "59s", "1m0s", "1m1s", "6m0s"]
