"""The store at start-up, from gunicorn's master: migrated in a child process, once per start.

In a child because psycopg chooses how it waits on the network when first imported: imported
in the master before the workers' gevent patching, every worker would inherit a wait that
blocks its whole hub. The master itself never opens the database.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]


def exit_unless_migrated(store: bool) -> None:
    """Migrate the store (`python -m app.store upgrade`); if that fails, its one line is said and we exit."""
    if not store:
        return
    done = subprocess.run(
        [sys.executable, "-m", "app.store", "upgrade"], cwd=_ROOT, stdout=subprocess.DEVNULL, check=False
    )
    if done.returncode != 0:
        raise SystemExit(2)
