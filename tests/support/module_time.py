"""The time each test module took in a run: a module's servers are started in its first test's
setup, so `--durations` shows them apart from the calls they serve; summed, they name the module."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import pytest

SHOWN = 10


def by_module(reports: Iterable[object]) -> list[tuple[str, float]]:
    """Seconds per module (setup, call and teardown of its tests together), longest first."""
    seconds: defaultdict[str, float] = defaultdict(float)
    for report in reports:
        if isinstance(report, pytest.TestReport):
            seconds[report.nodeid.split("::")[0]] += report.duration
    return sorted(seconds.items(), key=lambda item: item[1], reverse=True)


def summarise(terminal: pytest.TerminalReporter) -> None:
    """Write the longest modules after `--durations`' tests (pytest-xdist's workers' reports included)."""
    modules = by_module(report for reports in terminal.stats.values() for report in reports)
    if len(modules) < 2:
        return
    terminal.write_sep("=", f"slowest {min(SHOWN, len(modules))} modules")
    for module, seconds in modules[:SHOWN]:
        terminal.write_line(f"{seconds:8.2f}s {module}")
