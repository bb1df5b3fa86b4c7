"""A server's /metrics read as samples: (name, labels) -> value."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from harness.servers import Server

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(server: Server) -> Samples:
    text = httpx.get(server.url + "/metrics", timeout=10).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)
