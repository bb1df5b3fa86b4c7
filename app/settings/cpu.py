"""The cores this process may really use: its CPU affinity and its cgroup's quota, not the machine's count."""

from __future__ import annotations

import math
import os
from pathlib import Path

_CGROUP_V2 = Path("/sys/fs/cgroup/cpu.max")  # "max 100000" or "<quota> <period>"
_CGROUP_V1 = (Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us"))


def usable_cores() -> int:
    """The cores this process may run on at once: affinity, capped by a cgroup CPU quota."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = cgroup_quota()
    return max(1, min(cores, math.floor(quota)) if quota else cores)


def cgroup_quota() -> float | None:
    """Cores' worth of CPU time the cgroup may use, or None when it has no quota."""
    try:
        if _CGROUP_V2.exists():
            limit, period = _CGROUP_V2.read_text().split()[:2]
            return None if limit == "max" else int(limit) / int(period)
        quota, length = (int(p.read_text()) for p in _CGROUP_V1)
        return None if quota <= 0 else quota / length
    except (OSError, ValueError):
        return None
