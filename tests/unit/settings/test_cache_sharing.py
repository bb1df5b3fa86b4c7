"""LLM_CACHE_SHARING and the cache scope a request gets from its key and cache_salt."""

from __future__ import annotations

import pytest

from app.api.http.cache_scope import scope_of
from app.settings import cache_sharing
from app.settings.cache_sharing import CacheSharing


def test_each_key_is_its_own_tenant_by_default_and_groups_share() -> None:
    by_key = cache_sharing.parse("key")
    assert by_key.tenant("alice") != by_key.tenant("bob")
    groups = cache_sharing.parse("bob+alice, carol")
    assert groups.tenant("alice") == groups.tenant("bob") != groups.tenant("carol")
    assert groups.tenant("dave") == "key:dave"  # in no group: alone
    assert cache_sharing.parse("all").tenant("alice") == cache_sharing.parse("all").tenant("bob") == ""


@pytest.mark.parametrize("raw", ["", "alice+", "alice+bob,bob", "al ice", "../x"])
def test_a_bad_value_is_refused(raw: str) -> None:
    with pytest.raises(ValueError):
        cache_sharing.parse(raw)


def test_scopes_part_by_tenant_and_salt_and_say_nothing_of_the_key() -> None:
    by_key = CacheSharing()
    assert scope_of(None, by_key, None) == ""  # no keys: one shared cache, as before
    alice, bob = scope_of("alice", by_key, None), scope_of("bob", by_key, None)
    assert alice != bob and "alice" not in alice and len(alice) == 32
    assert scope_of("alice", by_key, "s1") not in (alice, scope_of("alice", by_key, "s2"))
    everyone = CacheSharing("all")
    assert scope_of("alice", everyone, None) == scope_of("bob", everyone, None) == ""
    assert scope_of("alice", everyone, "s1") == scope_of("bob", everyone, "s1") != ""  # vLLM's salt
    assert scope_of(None, by_key, "s1") == scope_of("x", everyone, "s1")
