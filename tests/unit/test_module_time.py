"""The per-module summary the integration tiers print: seconds summed by module, longest first."""

from __future__ import annotations

from typing import Literal

import pytest

from tests.support.module_time import by_module


def report(nodeid: str, when: Literal["setup", "call", "teardown"], duration: float) -> pytest.TestReport:
    return pytest.TestReport(nodeid, ("x", 1, "x"), {}, "passed", None, when, [], duration=duration)


def test_setup_calls_and_teardowns_add_up_per_module_longest_first() -> None:
    reports = [
        report("tests/a.py::test_one", "setup", 4.0),  # the module's server, started for its first test
        report("tests/a.py::test_one", "call", 0.5),
        report("tests/b.py::test_two[x]", "call", 3.0),
        report("tests/a.py::test_three", "call", 0.25),
        report("tests/b.py::test_two[y]", "teardown", 2.0),
        "a warning report, or anything else in the terminal's stats",
    ]
    assert by_module(reports) == [("tests/b.py", 5.0), ("tests/a.py", 4.75)]
