"""Settings at start-up: checked once in gunicorn's master, and described for the README."""

from __future__ import annotations

import sys
from typing import Any

from app.settings.config import SETTINGS, Config
from app.settings.setting import ConfigError


def exit_on_bad_config() -> Config:
    """Validate the settings at start-up; on a bad one print one line and exit non-zero."""
    try:
        return checked_config()
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


_loaded = False  # gunicorn reads its config file again on every reload (SIGHUP), in the same master


def first_load() -> bool:
    """True the first time the master reads gunicorn.conf.py: what must happen once happens then."""
    global _loaded
    first, _loaded = not _loaded, True
    return first


def guard_reload(server: Any) -> None:
    """Master (gunicorn's arbiter `server`): a SIGHUP with a bad setting keeps the workers that run.

    gunicorn's reload re-reads gunicorn.conf.py, whose check exits on a bad setting:
    the master would go, and under a Deployment a typo in a mounted file would become a
    crash loop. The settings are checked first; when one is bad, nothing is reloaded.
    """
    reload = server.reload

    def checked_reload() -> None:
        try:
            checked_config()
        except ConfigError as exc:
            server.log.error("configuration error on reload, the workers carry on as they were: %s", exc)
            return
        reload()

    server.reload = checked_reload


def checked_config() -> Config:
    """The settings, each LLM_MODELS entry checked as its worker will read it (ConfigError if bad)."""
    config = Config.from_env()
    for index, spec in enumerate(config.models):
        try:
            config.for_model(index)
        except ConfigError as exc:
            raise ConfigError(f"LLM_MODELS {spec.describe(index)}: {exc}") from None
    if config.tensor_split:
        import llama_cpp  # only then: the master need not load llama.cpp otherwise

        # A CPU-only build has one device whatever LLAMA_MAX_DEVICES says.
        gpu = llama_cpp.llama_supports_gpu_offload()
        config.check_devices(llama_cpp.llama_max_devices() if gpu else 1)
    return config


def describe_settings() -> list[tuple[str, str, str]]:
    """(variable, default, meaning) rows for the configuration page (docs/hooks/generated.py).

    A default worked out on the machine (a path) is left to the meaning to describe.
    """
    return [(s.env, "" if callable(s.default) else s.default, s.help) for s in SETTINGS.values()]
