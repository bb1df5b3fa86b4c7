"""How one setting is declared: its environment variable, parser, default and meaning."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class ConfigError(Exception):
    """A setting has a bad value; the message names the variable and the problem."""


@dataclass(frozen=True)
class Setting:
    """One environment variable: how to parse it, its default, and what it means."""

    env: str
    parse: Callable[[str], Any]
    default: str | Callable[[], str]
    help: str
    secret: bool = False  # never echoed in an error message
    optional: bool = False  # empty means None rather than the parser's verdict

    def default_text(self) -> str:
        return self.default() if callable(self.default) else self.default

    def read(self, raw: str) -> Any:
        """The value of `raw` (the default when empty); ConfigError naming the variable if it is bad."""
        raw = raw.strip() or self.default_text()
        if self.optional and not raw:
            return None
        try:
            return self.parse(raw)
        except ValueError as exc:
            shown = "<hidden>" if self.secret else repr(raw)
            raise ConfigError(f"{self.env}={shown}: {exc}") from None


def setting(
    env: str,
    parse: Callable[[str], Any],
    default: str | Callable[[], str],
    help: str,
    *,
    secret: bool = False,
    optional: bool = False,
) -> Any:
    """A Config field read from `env` (typed as Any so that the dataclass field keeps its own type)."""
    return dataclasses.field(metadata={"setting": Setting(env, parse, default, help, secret, optional)})
