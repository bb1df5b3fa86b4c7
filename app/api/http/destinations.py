"""Where the server may connect because a client named a URL: only where an operator allows it.

A URL is cleared when its host (or a URL prefix) is in the operator's allowlist and every
address its name resolves to is public, unless the URL names a listed IP address itself (a
name that resolves inside the network is how rebinding attacks get in). Media fetching
(LLM_MEDIA_FETCH) and MCP servers (LLM_MCP_ALLOW) both pass through here.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from urllib.parse import SplitResult, unquote, urlsplit


class RefusedError(Exception):
    """The URL may not be reached; the message says why and names the setting."""


@dataclass(frozen=True)
class Destination:
    """A URL cleared for connecting: where to connect, and what to ask for."""

    https: bool
    host: str  # the name the URL gives (sent as Host, and checked against the certificate)
    address: str  # the checked IP address to connect to
    port: int
    path: str


# A path a server may read otherwise than it is written: a dot segment, or a dot, slash or backslash
# percent-encoded (`/public/../admin`, `/public/%2e%2e/admin`), or a backslash, which some servers
# take for a slash. A prefix of the URL in the allowlist is compared with paths that have none.
_AMBIGUOUS = re.compile(r"%2[eEfF]|%5[cC]|\\")


def listed(url: str, allowlist: tuple[str, ...]) -> bool:
    """Whether the allowlist names the URL's host (host, or host:port) or a prefix of the URL: the
    same scheme, host and port, and a path under the prefix's, segment by segment (a path that could
    be read as another, and a URL with user info, are under no prefix)."""
    parts = urlsplit(url)
    for entry in allowlist:
        if "://" not in entry:
            if entry.lower().strip("[]") == _netloc(parts):
                return True
            continue
        listed_parts = urlsplit(entry)
        if (parts.scheme.lower(), _netloc(parts)) != (listed_parts.scheme.lower(), _netloc(listed_parts)):
            continue
        if parts.username is not None or parts.password is not None or _ambiguous(parts.path):
            continue
        prefix, path = listed_parts.path.rstrip("/"), parts.path or "/"
        if path == prefix or path.startswith(prefix + "/"):
            return True
    return False


def _netloc(parts: SplitResult) -> str:
    """host, or host:port where the port is not the scheme's own (a host listed without a port is
    that host on the scheme's own port, not every port of it)."""
    host = (parts.hostname or "").lower()
    return (
        host
        if parts.port in (None, 443 if parts.scheme.lower() == "https" else 80)
        else f"{host}:{parts.port}"
    )


def _ambiguous(path: str) -> bool:
    return bool(_AMBIGUOUS.search(path)) or any(part in (".", "..") for part in unquote(path).split("/"))


def cleared(url: str, allowlist: tuple[str, ...], setting: str, what: str) -> Destination:
    """`url`, checked against `allowlist` (the operator's `setting`) and resolved; RefusedError otherwise.
    `what`: what is reached there, for the messages ("fetches media from")."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RefusedError("must be an http(s) URL")
    host = parts.hostname.lower()
    if not listed(url, allowlist):
        raise RefusedError(f"{host} is not among the hosts this server {what} ({setting})")
    https = parts.scheme == "https"
    port = parts.port or (443 if https else 80)
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise RefusedError(f"{host} does not resolve") from None
    addresses = [ipaddress.ip_address(info[4][0]) for info in found]
    literal = _literal(host)
    for address in addresses:
        if not address.is_global and address != literal:
            raise RefusedError(
                f"{host} resolves to a private or loopback address ({address}); list the address itself "
                f"in {setting} to allow it"
            )
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Destination(https, host, str(addresses[0]), port, path)


def _literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
