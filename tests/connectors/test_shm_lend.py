"""Lent reads of the SharedMemoryConnector: objects copied out of mappings kept by readers."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from tests.connectors.conftest import copy_lent
from tether._shm import maps as _shm_maps
from tether._shm import named
from tether.connectors.protocols import Capabilities, LendingConnector
from tether.connectors.shared_memory import (
    SHM_DIR,
    SharedMemoryConnector,
    SharedMemoryKey,
    cleanup,
)
from tether.exceptions import ConnectorError
from tether.serialize import BytesLike
from tether.store import Store

LARGE = 1 << 20


def _data(tag: int, size: int = LARGE) -> bytes:
    return bytes([tag % 251]) * size


def _inode(key: SharedMemoryKey) -> int:
    return os.stat(os.path.join(SHM_DIR, key.name)).st_ino


@pytest.fixture
def store(shm: SharedMemoryConnector) -> Iterator[Store[Any]]:
    with Store('shm-lend', shm, cache_size=0) as s:
        yield s


@pytest.fixture
def maps_spy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many copy-on-write mappings ``get`` (or ``keep``) made of pooled segments."""
    made: list[int] = []
    real = named._map

    def spy(fd: int, size: int) -> memoryview | bytearray:
        made.append(size)
        return real(fd, size)

    monkeypatch.setattr(named, '_map', spy)
    return made


def test_the_connector_lends_and_the_store_uses_it(shm: SharedMemoryConnector) -> None:
    assert isinstance(shm, LendingConnector)
    assert Capabilities.of(shm).lending is shm
    with Store('shm-lend-caps', shm) as store:
        assert store.capabilities.lending is shm


@pytest.mark.parametrize('size', [0, 1000, LARGE])
def test_get_lent_passes_the_object_read_only(shm: SharedMemoryConnector, size: int) -> None:
    key = shm.put(_data(3, size))
    seen: list[bool] = []

    def use(view: memoryview, keep: Callable[[], BytesLike]) -> bytes:
        seen.append(view.readonly)
        assert bytes(keep()) == _data(3, size)
        return bytes(view)

    assert shm.get_lent(key, use, None) == _data(3, size)
    assert seen == [True]
    shm.evict(key)
    assert shm.get_lent(key, use, 'missing') == 'missing'
    assert seen == [True]  # not called for a missing key


def test_a_reader_keeps_a_read_only_mapping_of_a_large_segment(
    shm: SharedMemoryConnector,
) -> None:
    key = shm.put(_data(1))
    _shm_maps.clear()  # as in a process that did not write it
    assert shm.get_lent(key, copy_lent, None) == _data(1)
    ((fd, mapping, writable),) = _shm_maps._maps.items.values()
    assert not writable
    assert os.fstat(fd).st_ino == _inode(key)
    shm.evict(key)
    # Another process reuses the segment (the kept mapping holds no lock) ...
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(wfd, shm.put(_data(2)).name.encode())
        os._exit(0)
    os.close(wfd)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    b = SharedMemoryKey(os.read(rfd, 1000).decode())
    os.close(rfd)
    assert _inode(b) == os.fstat(fd).st_ino
    # ... and this one reads the new object through the mapping it kept.
    assert shm.get_lent(b, copy_lent, None) == _data(2)
    assert list(_shm_maps._maps.items.values()) == [(fd, mapping, False)]
    assert shm.get_lent(key, copy_lent, None) is None


def test_a_store_builds_bytes_from_the_lent_mapping(
    store: Store[Any], maps_spy: list[int]
) -> None:
    key = store.put(_data(1))
    _shm_maps.clear()
    got = store.get(key)
    assert type(got) is bytes
    assert got == _data(1)
    assert maps_spy == []  # no mapping of its own
    assert len(_shm_maps._maps) == 1
    store.evict(key)
    again = store.put(_data(2))  # reuses the segment: what was read must not change
    assert got == _data(1)
    assert store.get(again) == _data(2)


def test_str_bytearray_and_plain_pickles_are_lent_arrays_are_not(
    store: Store[Any], maps_spy: list[int]
) -> None:
    text, array = 'é' * LARGE, bytearray(_data(4))
    nested = {'a': [_data(5, 1000)] * 400}
    for obj in (text, array, nested):
        key = store.put(obj)
        got = store.get(key)
        assert type(got) is type(obj)
        assert got == obj
        store.evict(key)
        assert maps_spy == []
    numbers = np.arange(LARGE // 8, dtype=np.int64)
    key = store.put(numbers)
    got = store.get(key)
    assert len(maps_spy) == 1
    got[0] = -1  # built on a copy-on-write mapping of its own, as before
    assert int(store.get(key)[0]) == 0
    store.evict(key)
    b = store.put(np.ones(LARGE // 8))  # the array still maps its segment: not reused
    assert int(got[1]) == 1
    assert int(got[-1]) == LARGE // 8 - 1
    store.evict(b)


def test_a_custom_deserializer_gets_memory_it_may_keep(shm: SharedMemoryConnector) -> None:
    with Store('shm-lend-custom', shm, cache_size=0, deserializer=memoryview) as store:
        key = store.put(_data(1))
        kept = store.get(key)
        assert not kept.readonly
        store.evict(key)
        b = store.put(_data(2))
        assert bytes(kept[-LARGE:]) == _data(1)
        store.evict(b)


def test_a_lent_read_of_an_evicted_and_reused_segment_gets_nothing(
    store: Store[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    shm = store.connector
    a = store.put(_data(1))
    path = os.path.join(SHM_DIR, a.name)
    early = os.open(path, os.O_RDONLY)
    store.evict(a)
    b = store.put(_data(2))
    assert os.fstat(early).st_ino == _inode(b)
    real_open = os.open
    monkeypatch.setattr(
        named.os,
        'open',
        lambda p, *a, **k: os.dup(early) if p == path else real_open(p, *a, **k),
    )
    assert store.get(a, default='missing') == 'missing'
    assert shm.get_lent(a, copy_lent, None) is None
    monkeypatch.undo()
    os.close(early)
    assert store.get(b) == _data(2)


def test_a_lent_read_of_a_segment_being_written_gets_nothing(
    shm: SharedMemoryConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fcntl

    key = shm.put(_data(1))
    path = os.path.join(SHM_DIR, key.name)
    early = os.open(path, os.O_RDONLY)  # opened through the key before the evict
    writer = os.open(path, os.O_RDONLY)
    claimed = f'{path}.claimed.tmp'
    try:
        os.rename(path, claimed)  # as a writer that claimed it from the pool
        fcntl.flock(writer, fcntl.LOCK_EX)  # ... to rewrite it for another key
        real_open = os.open
        monkeypatch.setattr(
            named.os,
            'open',
            lambda p, *a, **k: os.dup(early) if p == path else real_open(p, *a, **k),
        )
        assert shm.get_lent(key, copy_lent, None) is None
        monkeypatch.undo()
    finally:
        os.close(writer)
        os.close(early)
        os.rename(claimed, path)
    assert shm.get_lent(key, copy_lent, None) == _data(1)


def test_a_lent_read_of_a_corrupt_segment_raises(store: Store[Any]) -> None:
    key = store.put(_data(1))
    store.connector.flush()  # the put's background copy would write the header again
    with open(os.path.join(SHM_DIR, key.name), 'r+b') as f:
        f.write(b'garbage!')
    with pytest.raises(ConnectorError, match='header'):
        store.get(key)


def test_a_mapping_put_back_twice_keeps_one(shm: SharedMemoryConnector) -> None:
    # Two threads reading one segment each map it; the second put back closes the first.
    key = shm.put(_data(1))
    _shm_maps.clear()
    st = os.stat(os.path.join(SHM_DIR, key.name))
    first = _shm_maps._reader_entry(os.path.join(SHM_DIR, key.name), st, LARGE)
    second = _shm_maps._reader_entry(os.path.join(SHM_DIR, key.name), st, LARGE)
    assert first is not None
    assert second is not None
    ident = (st.st_dev, st.st_ino)
    _shm_maps._maps.keep(ident, first)
    _shm_maps._maps.keep(ident, second)
    assert list(_shm_maps._maps.items.values()) == [second]
    assert first[1].closed


def test_a_readers_mappings_of_removed_segments_are_dropped(shm_namespace: str) -> None:
    with SharedMemoryConnector(shm_namespace) as c:
        key = c.put(_data(1))
        _shm_maps.clear()
        assert c.get_lent(key, copy_lent, None) == _data(1)
        assert len(_shm_maps._maps) == 1
        cleanup(shm_namespace)  # from elsewhere: the mapping would keep the memory ...
        assert len(_shm_maps._maps) == 1
        assert c.get_lent(key, copy_lent, 'gone') == 'gone'
        assert _shm_maps._maps.items == {}  # ... until this process's next read
