"""The cache scope of a request: whose cached prompts it may resume, from its key and `cache_salt`.

A prompt's cells are resumed only by requests of the same scope, so one tenant's cached
prompt never shortens another's evaluation, nor shows in its `cached_tokens`, its timings
or its X-Cache-Miss header (a side channel vLLM closed with `cache_salt`, CVE-2025-46570).
The scope is a digest: it says nothing of the key, and it is the same on every worker.
"""

from __future__ import annotations

import hashlib

from flask import g

from app.settings.cache_sharing import CacheSharing
from app.settings.current import current_config


def scope_of(key_name: str | None, sharing: CacheSharing, salt: str | None) -> str:
    """The scope for a request of key `key_name` (None: the server has no keys) and `salt` (vLLM's
    `cache_salt`: requests with another salt, or none, never share a cache); "" is the one shared
    scope of a server without keys, or with LLM_CACHE_SHARING=all, for requests without a salt."""
    tenant = "" if key_name is None else sharing.tenant(key_name)
    if not tenant and not salt:
        return ""
    return hashlib.blake2b(f"{tenant}\0{salt or ''}".encode(), digest_size=16).hexdigest()


def request_scope(salt: str | None) -> str:
    """The scope of the request being served."""
    key = g.get("api_key")
    return scope_of(None if key is None else key.name, current_config().cache_sharing, salt)
