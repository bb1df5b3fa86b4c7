"""The load tool refuses any target but this machine."""

from __future__ import annotations

import pytest

from bench.load import require_loopback


@pytest.mark.parametrize("url", ["http://10.0.0.1:8000", "http://192.168.1.1", "http://8.8.8.8"])
def test_load_tool_refuses_non_loopback_targets(url: str) -> None:
    with pytest.raises(SystemExit, match="loopback addresses only"):
        require_loopback(url)


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000", "http://[::1]:8000", "http://localhost:1"])
def test_load_tool_accepts_loopback_targets(url: str) -> None:
    require_loopback(url)
