"""LLM_MCP_SERVERS: MCP servers the operator configures, which requests name by label alone."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class McpServerConfig:
    """One configured server: a streamable-HTTP `url`, or a `command` run over stdio; its headers
    (read from a file at start-up, so that secrets live in files, not in the environment)."""

    name: str
    url: str | None
    command: tuple[str, ...] | None
    headers: tuple[tuple[str, str], ...] = ()


def parse_mcp_servers(raw: str) -> tuple[McpServerConfig, ...]:
    """`{"name": {"url": "http://...", "headers_file": "/run/secrets/h.json"}, "other": {"command":
    ["prog", "--flag"]}}` (a command may be one string, split as a shell would)."""
    try:
        given = json.loads(raw)
    except json.JSONDecodeError as bad:
        raise ValueError(f"not JSON ({bad})") from None
    if not isinstance(given, dict):
        raise ValueError('must be a JSON object: {"name": {"url": ...} or {"command": [...]}}')
    return tuple(_server(name, spec) for name, spec in given.items())


def _server(name: str, spec: object) -> McpServerConfig:
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
        raise ValueError(f"server name {name!r}: letters, digits, _ and - only (as a server_label)")
    if not isinstance(spec, dict) or ("url" in spec) == ("command" in spec):
        raise ValueError(f"server {name!r}: give either url or command")
    unknown = set(spec) - {"url", "command", "headers_file"}
    if unknown:
        raise ValueError(f"server {name!r}: unknown keys {', '.join(sorted(unknown))}")
    url = spec.get("url")
    if url is not None and not (isinstance(url, str) and re.fullmatch(r"https?://\S+", url)):
        raise ValueError(f"server {name!r}: url must be an http(s) URL")
    command = spec.get("command")
    if isinstance(command, str):
        command = shlex.split(command)
    if command is not None and not (command and all(isinstance(part, str) for part in command)):
        raise ValueError(f"server {name!r}: command must be a list of strings or one string")
    return McpServerConfig(
        name, url, tuple(command) if command else None, _headers(name, spec.get("headers_file"))
    )


def _headers(name: str, path: object) -> tuple[tuple[str, str], ...]:
    if path is None:
        return ()
    try:
        headers = json.loads(Path(str(path)).read_text())
    except (OSError, json.JSONDecodeError) as bad:
        raise ValueError(f"server {name!r}: headers_file {path}: {bad}") from None
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise ValueError(f"server {name!r}: headers_file {path} must hold a JSON object of strings")
    return tuple((str(k), v) for k, v in headers.items())
