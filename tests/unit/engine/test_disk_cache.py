"""The disk tier: states written by one cache found by another (the next server), bounded, verified."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from app.engine.cache import disk_cache
from app.engine.cache.disk_cache import DiskCache
from app.engine.cache.prefix_blocks import BLOCK, block_hashes
from app.engine.cache.saved_state import SavedState
from app.engine.checkpoints import Checkpoint


def saved(
    tokens: list[int], state: bytes = b"S" * 100, live_from: int = 0, checkpoints: tuple = ()
) -> SavedState:
    return SavedState(tuple(tokens), state, tuple(block_hashes(tokens)), live_from, checkpoints)


def stored(folder: Path) -> list[Path]:
    return sorted(folder.glob("*/*.kv"))


def written(cache: DiskCache, *states: SavedState) -> None:
    for state in states:
        cache.put(state)
    cache.flush()


def test_a_state_written_by_one_cache_is_found_by_the_next(tmp_path: Path) -> None:
    history = list(range(1000, 1000 + 3 * BLOCK))
    first = DiskCache(tmp_path, 1 << 20, "fp_a")
    written(first, saved(history, b"cells", 2 * BLOCK, (Checkpoint(BLOCK, b"window"),)))
    first.close()
    second = DiskCache(tmp_path, 1 << 20, "fp_a")
    # The next turn: the history, then more. Its live range starts at 2 blocks, a checkpoint at 1.
    found = second.find(history + [7, 8, 9], beat=0)
    assert found is not None
    state, length = found
    assert (state.state, state.live_from, length) == (b"cells", 2 * BLOCK, 3 * BLOCK)
    assert state.checkpoints == (Checkpoint(BLOCK, b"window"),)
    # A prompt that leaves the history before the live range resumes at the checkpoint, or not at all.
    edited = history[: BLOCK + 10] + [1] * BLOCK
    assert second.find(edited, beat=0) is not None and second.find(edited, beat=0)[1] == BLOCK  # type: ignore[index]
    assert (
        second.find(history + [1], beat=3 * BLOCK - 10) is None
    )  # nothing a block better than the cells held
    assert second.find([5] * (3 * BLOCK), beat=0) is None


def test_another_models_folder_is_not_read_and_its_states_are_not_used(tmp_path: Path) -> None:
    tokens = list(range(2 * BLOCK))
    written(DiskCache(tmp_path, 1 << 20, "fp_a"), saved(tokens))
    assert DiskCache(tmp_path, 1 << 20, "fp_b").find(tokens + [1], beat=0) is None


def test_a_corrupt_or_foreign_file_is_skipped_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tokens = list(range(2 * BLOCK))
    writer = DiskCache(tmp_path, 1 << 20, "fp_a")
    written(writer, saved(tokens, b"A" * 64), saved([9] * (2 * BLOCK), b"B" * 64))
    corrupt, foreign = stored(tmp_path)
    corrupt.write_bytes(corrupt.read_bytes()[:-1] + b"!")  # a byte of the state changed
    foreign.write_bytes(foreign.read_bytes().replace(b'"fp_a"', b'"fp_z"'))
    reader = DiskCache(tmp_path, 1 << 20, "fp_a")
    with caplog.at_level(logging.WARNING, logger="app.engine.batcher"):
        assert reader.find(tokens + [1], beat=0) is None
        assert reader.find([9] * (2 * BLOCK) + [1], beat=0) is None
        assert reader.find(tokens + [1], beat=0) is None  # asked again: not read again, not said again
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and all("disk cache: skipping" in line for line in said)
    assert any("checksum" in line for line in said) and any("another model" in line for line in said)


def test_the_folder_stays_within_its_limit_least_recently_used_out(tmp_path: Path) -> None:
    states = [saved([n] * (2 * BLOCK), bytes(4000)) for n in range(4)]
    cache = DiskCache(tmp_path, 10_000, "fp_a")  # room for two files of about 4.6 kB
    written(cache, states[0], states[1])
    os.utime(stored(tmp_path)[0], ns=(1, 1))
    os.utime(stored(tmp_path)[1], ns=(2, 2))
    assert cache.find(list(states[0].tokens) + [1], beat=0) is not None  # used: now the most recent
    written(cache, states[2])
    assert len(stored(tmp_path)) == 2 and sum(p.stat().st_size for p in stored(tmp_path)) <= 10_000
    assert cache.find(list(states[0].tokens) + [1], beat=0) is not None
    assert cache.find(list(states[1].tokens) + [1], beat=0) is None  # the least recently used went
    written(cache, saved([7] * (2 * BLOCK), bytes(20_000)))  # larger than the whole tier: not written
    assert len(stored(tmp_path)) == 2


def test_a_state_already_within_a_stored_one_is_not_written_again(tmp_path: Path) -> None:
    tokens = list(range(3 * BLOCK))
    cache = DiskCache(tmp_path, 1 << 20, "fp_a")
    written(cache, saved(tokens), saved(tokens[: 2 * BLOCK]), saved(tokens))
    assert len(stored(tmp_path)) == 1
    written(cache, saved(tokens + [1] * BLOCK))  # a longer one replaces it
    assert len(stored(tmp_path)) == 1
    assert cache.find(tokens + [1] * BLOCK + [2], beat=0)[1] == 4 * BLOCK  # type: ignore[index]


def test_partial_files_of_writers_that_died_are_removed(tmp_path: Path) -> None:
    folder = tmp_path / "fp_a"
    folder.mkdir()
    dead = folder / ".abc.kv.999999999.partial"
    alive = folder / f".def.kv.{os.getpid()}.partial"
    dead.write_bytes(b"half")
    alive.write_bytes(b"half")
    DiskCache(tmp_path, 1 << 20, "fp_a")
    assert not dead.exists() and alive.exists()
    assert disk_cache.SUFFIX == ".kv"
