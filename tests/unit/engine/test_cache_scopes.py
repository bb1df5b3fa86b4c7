"""Cache scopes on the counting fake: a tenant's cells, saved states and files resume its own prompts only."""

from __future__ import annotations

from pathlib import Path

from app.engine.cache import slot_files
from app.engine.cache.disk_cache import DiskCache
from app.engine.cache.prefix_blocks import BLOCK, block_hashes
from app.engine.cache.saved_state import SavedState
from app.engine.cache.slot_files import SlotFile
from tests.unit.engine.fake_context import FakeContext, job
from tests.unit.engine.test_batcher import Run
from tests.unit.engine.test_host_cache import run_with_host_cache

HISTORY = list(range(1, 3 * BLOCK))


def test_a_prompt_of_another_scope_resumes_nothing_and_one_of_the_same_scope_resumes_it() -> None:
    run = Run(FakeContext(parallel=2, n_ctx=512, n_batch=64))
    alice = job(HISTORY, max_tokens=2, cache_scope="alice")
    run.submit(alice)
    run.until_idle()
    bob = job(HISTORY + [5], max_tokens=2, cache_scope="bob")
    run.submit(bob)
    run.until_idle()
    assert run.ending(bob).cached_tokens == 0  # Alice's cells are there, and not for Bob
    again = job(HISTORY + [6], max_tokens=2, cache_scope="alice")
    run.submit(again)
    run.until_idle()
    assert run.ending(again).cached_tokens == len(HISTORY)  # her own: kept while Bob took the other


def test_a_kept_state_is_given_back_to_its_scope_only() -> None:
    context = FakeContext(parallel=1, n_ctx=512, n_batch=64)
    run = run_with_host_cache(context)
    run.submit(job(HISTORY, max_tokens=2, cache_scope="alice"))
    run.until_idle()
    bob = job(HISTORY + [5], max_tokens=2, cache_scope="bob")  # takes the one sequence: hers is kept
    run.submit(bob)
    run.until_idle()
    assert run.ending(bob).cached_tokens == 0
    carol = job(HISTORY + [7], max_tokens=2, cache_scope="carol")  # Bob's is kept too; neither hers
    run.submit(carol)
    run.until_idle()
    assert run.ending(carol).cached_tokens == 0
    alice = job(HISTORY + [6], max_tokens=2, cache_scope="alice")
    run.submit(alice)
    run.until_idle()
    assert run.ending(alice).cached_tokens == len(HISTORY)


def test_the_disk_tier_keeps_each_scopes_file_and_finds_it_for_that_scope_only(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, 1 << 20, "fp")
    for scope in ("alice", "bob"):  # the same tokens: two files, not one
        cache.put(
            SavedState(tuple(HISTORY), scope.encode(), tuple(block_hashes(HISTORY, scope)), scope=scope)
        )
    cache.close()
    assert len(list(tmp_path.glob("fp/*.kv"))) == 2
    reopened = DiskCache(tmp_path, 1 << 20, "fp")
    for scope in ("alice", "bob"):
        found = reopened.find(HISTORY + [1], 0, scope)
        assert found is not None and found[0].state == scope.encode() and found[0].scope == scope
    assert reopened.find(HISTORY + [1], 0, "carol") is None
    assert reopened.find(HISTORY + [1], 0) is None  # nor the shared scope of a server without keys


def test_a_slot_files_scope_is_kept_and_under_its_checksum(tmp_path: Path) -> None:
    path = tmp_path / "a.kv"
    saved = SlotFile([1, 2, 3], b"cells", scope="0123abcd")
    slot_files.write(path, "fp", saved)
    assert slot_files.read(path, "fp")[0] == saved
    assert slot_files.read_listing(path, "fp")[3] == "0123abcd"
    path.write_bytes(path.read_bytes().replace(b"0123abcd", b"0123abce"))  # moved to another tenant
    try:
        slot_files.read(path, "fp")
    except slot_files.SlotFileError as refused:
        assert "checksum" in str(refused)
    else:
        raise AssertionError("a file whose scope was changed was read")


def test_the_shared_scope_hashes_blocks_as_before_and_a_scope_changes_every_hash() -> None:
    assert block_hashes(HISTORY) == block_hashes(HISTORY, "")
    assert not set(block_hashes(HISTORY)) & set(block_hashes(HISTORY, "alice"))
