"""The object table and its buffer pool (in-process units of the node server)."""

from __future__ import annotations

from pathlib import Path

from tether._serve.objects import BufferPool, ObjectTable
from tether.node import format_size, parse_size


def test_evicted_buffers_are_reused_for_the_same_size(tmp_path: Path) -> None:
    pool = BufferPool(1 << 20, min_size=10)
    table = ObjectTable(1000, tmp_path, pool)
    buf = pool.take(100)
    buf[:] = b'x' * 100
    table.put('a', buf)
    del buf
    table.evict('a')
    assert pool.size == 100
    again = pool.take(100)
    assert pool.hits == 1
    assert again == b'x' * 100  # the same memory, contents not cleared
    assert pool.take(100) is not again


def test_buffers_still_in_use_are_not_reused(tmp_path: Path) -> None:
    pool = BufferPool(1 << 20, min_size=10)
    table = ObjectTable(1000, tmp_path, pool)
    table.put('a', bytearray(100))
    view = memoryview(table.get('a'))  # e.g. a reply still being written
    table.evict('a')
    assert pool.size == 0
    view.release()


def test_spilled_buffers_go_to_the_pool_and_pool_is_bounded(tmp_path: Path) -> None:
    pool = BufferPool(1000, min_size=10)
    table = ObjectTable(1000, tmp_path, pool)
    for i in range(5):
        table.put(str(i), bytearray(400))
    assert table.spilled == 3
    assert pool.size <= 1000
    assert pool.size == 800
    small = BufferPool(1000, min_size=500)
    small.give(bytearray(100))
    assert small.size == 0


def test_sizes() -> None:
    assert parse_size('4GB') == 4_000_000_000
    assert parse_size('512MiB') == 512 << 20
    assert parse_size('1.5k') == 1500
    assert parse_size(123) == 123
    assert format_size(3 << 30) == '3.0 GiB'
