"""`python -m app.store upgrade`: migrate the store LLM_STORE_URL names (the master runs it at start)."""

from __future__ import annotations

import argparse
import sys

from app.settings.setting import ConfigError
from app.settings.startup import exit_on_bad_config
from app.store import migrate
from app.store.errors import StoreError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.store", description=__doc__)
    parser.add_argument("command", choices=["upgrade", "head"], help="upgrade: run the missing migrations")
    args = parser.parse_args(argv)
    if args.command == "head":
        print(migrate.head())
        return 0
    config = exit_on_bad_config()
    if not config.store:
        print("LLM_STORE=off: nothing to migrate")
        return 0
    setting = "LLM_STORE_URL" if config.raw["store_url"] is not None else "LLM_DATA_DIR"
    try:
        renames = {key.legacy_name: key.name for key in config.api_keys if key.legacy_name}
        print(f"store at revision {migrate.upgrade(config.store_url, renames)}")
    except (StoreError, ConfigError) as exc:
        print(f"configuration error: {setting}: the store cannot be opened: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
