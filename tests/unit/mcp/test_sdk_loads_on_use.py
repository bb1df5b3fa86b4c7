"""The MCP SDK is imported by the first exchange, not by every worker that starts."""

from __future__ import annotations

import subprocess
import sys

# A fresh interpreter: this one has imported the SDK already if any test before used it.
_PROBE = """
import sys
from app import create_app
from app.api.generation import mcp_calls
from tests.unit.conftest import FakeEngine, make_config
create_app(make_config(LLM_MCP_ALLOW="127.0.0.1"), engine=FakeEngine())
loaded = sorted(m for m in sys.modules if m == "mcp" or m.startswith(("mcp.", "httpx2")))
print(loaded, file=sys.stderr)
sys.exit(3 if loaded else 0)
"""


def test_starting_the_app_imports_no_mcp_sdk() -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == "[]"
