"""Every metric the server exports is on the metrics page, under its full name.

The names come from what the app registers (every module of it imported, as a worker has)
and from the model server protocol's collector, which a worker adds at each scrape; the
process and Python metrics of prometheus_client's default registry are not served by a
gunicorn worker (its multiprocess collector reads the workers' files), so they are left out.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import REGISTRY

from app import create_app
from app.telemetry.model_server import ModelServerCollector
from app.telemetry.worker_board import WorkerBoard
from tests.unit.conftest import FakeEngine, make_config

PAGE = Path(__file__).resolve().parents[2] / "docs" / "operations" / "metrics.md"


def exported() -> set[str]:
    """Every metric's name as a scrape shows it (a counter's with `_total`)."""
    create_app(make_config(), engine=FakeEngine())  # every module that declares one, imported
    families = [f for f in REGISTRY.collect() if not f.name.startswith(("process_", "python_"))]
    families += list(ModelServerCollector(WorkerBoard(2), {0: ["an-adapter"]}).collect())
    return {f.name + "_total" if f.type == "counter" else f.name for f in families}


def test_every_exported_metric_is_on_the_metrics_page() -> None:
    names, page = exported(), PAGE.read_text()
    assert len(names) > 50 and "vllm:lora_requests_info" in names and "llm_mcp_calls_total" in names
    missing = sorted(name for name in names if f"`{name}" not in page)
    assert not missing, f"on no row of docs/operations/metrics.md: {missing}"
