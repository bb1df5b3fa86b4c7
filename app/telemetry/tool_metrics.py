"""Prometheus metrics of the MCP servers the server calls for its clients: listings and calls, each
by server and outcome, and how long calls take.

`server` is the operator's name for a configured server, else the host a request's URL names: both
bounded by the operator's settings (a request's own server_label is the client's to choose)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

MCP_LISTINGS = Counter(
    "llm_mcp_listings_total", "MCP servers' tool listings, by server and outcome", ["server", "outcome"]
)
MCP_CALLS = Counter(
    "llm_mcp_calls_total", "Calls to MCP servers' tools, by server and outcome", ["server", "outcome"]
)
MCP_CALL_SECONDS = Histogram(
    "llm_mcp_call_seconds",
    "Time a call to an MCP server's tool took, connecting included",
    ["server"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120),
)


def listed(server: str, failed: bool) -> None:
    MCP_LISTINGS.labels(server=server, outcome="failed" if failed else "completed").inc()


def called(server: str, seconds: float, failed: bool) -> None:
    MCP_CALLS.labels(server=server, outcome="failed" if failed else "completed").inc()
    MCP_CALL_SECONDS.labels(server=server).observe(seconds)
