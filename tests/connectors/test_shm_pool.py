"""Reusable segments of the SharedMemoryConnector: reuse, safety of readers, no leaks."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
from typing import Any

import pytest
from click.testing import CliRunner

from tests.shm._child import child_exit_code
from tether._shm import maps as _shm_maps
from tether._shm import named
from tether.cli import cli
from tether.connectors import _shm_pool
from tether.connectors.shared_memory import (
    SHM_DIR,
    SharedMemoryConnector,
    SharedMemoryKey,
    cleanup,
    segments,
)
from tether.exceptions import ConnectorError, ProxyResolveMissingKeyError
from tether.store import Store, get_key

LARGE = 1 << 20


def _data(tag: int, size: int = LARGE) -> bytes:
    return bytes([tag % 251]) * size


def _pool_entries(ns: str) -> list[str]:
    try:
        return os.listdir(os.path.join(SHM_DIR, f'tether-{ns}-pool'))
    except FileNotFoundError:
        return []


def _inode(key: SharedMemoryKey) -> int:
    return os.stat(os.path.join(SHM_DIR, key.name)).st_ino


def test_an_evicted_large_segment_is_reused_by_the_next_put(shm: SharedMemoryConnector) -> None:
    a = shm.put(_data(1))
    inode = _inode(a)
    shm.evict(a)
    assert not shm.exists(a)
    assert shm.get(a) is None
    assert len(_pool_entries(shm.namespace)) == 1
    b = shm.put(_data(2, LARGE - 7))
    assert _inode(b) == inode  # written over the evicted object's pages
    assert _pool_entries(shm.namespace) == []
    assert bytes(shm.get(b)) == _data(2, LARGE - 7)
    assert shm.get(a) is None


def test_small_objects_and_a_disabled_pool_unlink_on_evict(shm_namespace: str) -> None:
    with SharedMemoryConnector(shm_namespace, pool_bytes=0) as off:
        key = off.put(_data(1))
        assert _shm_pool.key_id(key.name) is None
        off.evict(key)
        assert _pool_entries(shm_namespace) == []
    with SharedMemoryConnector(shm_namespace) as on:
        small = on.put(b'x' * 1000)
        on.evict(small)
        assert _pool_entries(shm_namespace) == []
    with SharedMemoryConnector(shm_namespace, pool_bytes=LARGE) as tiny:
        tiny.evict(tiny.put(_data(1)))  # a 2 MiB segment does not fit a 1 MiB pool
        assert _pool_entries(shm_namespace) == []
    assert segments(shm_namespace) == []


def test_a_mapped_segment_is_never_rewritten(shm: SharedMemoryConnector) -> None:
    a = shm.put(_data(1))
    view = shm.get(a)
    assert view is not None
    inode = _inode(a)
    shm.evict(a)
    b = shm.put(_data(2))
    assert _inode(b) != inode  # still mapped: not reused (unlinked instead)
    assert bytes(view) == _data(1)  # the reader's mapping still holds its object
    assert bytes(shm.get(b)) == _data(2)
    assert _pool_entries(shm.namespace) == []


def test_a_reader_racing_an_evict_and_a_reuse_gets_nothing(
    shm: SharedMemoryConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The reader opens A's segment, then A is evicted and its segment rewritten for B
    # before the reader locks it: it must find B's id in the header and return None.
    a = shm.put(_data(1))
    path = os.path.join(SHM_DIR, a.name)
    early = os.open(path, os.O_RDONLY)
    shm.evict(a)
    b = shm.put(_data(2))
    assert os.fstat(early).st_ino == _inode(b)  # the very segment the reader opened
    real_open = os.open
    monkeypatch.setattr(
        named.os, 'open', lambda p, *a, **k: early if p == path else real_open(p, *a, **k)
    )
    assert shm.get(a) is None
    monkeypatch.undo()
    assert bytes(shm.get(b)) == _data(2)


def test_a_reader_racing_a_writer_of_its_segment_gets_nothing(
    shm: SharedMemoryConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As above, but the reader comes while the writer is still writing B.
    a = shm.put(_data(1))
    path = os.path.join(SHM_DIR, a.name)
    early = os.open(path, os.O_RDONLY)
    shm.evict(a)
    writing, resume = threading.Event(), threading.Event()
    real_write = _shm_maps.write

    def slow_write(path: str, fd: int, buffers: list[memoryview]) -> None:
        writing.set()
        assert resume.wait(30)
        real_write(path, fd, buffers)

    monkeypatch.setattr(_shm_maps, 'write', slow_write)
    keys: list[SharedMemoryKey] = []
    writer = threading.Thread(target=lambda: keys.append(shm.put(_data(2))))
    writer.start()
    try:
        assert writing.wait(30)
        real_open = os.open
        monkeypatch.setattr(
            named.os, 'open', lambda p, *a, **k: early if p == path else real_open(p, *a, **k)
        )
        assert shm.get(a) is None
    finally:
        resume.set()
        writer.join(30)
    monkeypatch.undo()
    assert bytes(shm.get(keys[0])) == _data(2)


def test_a_proxy_of_an_evicted_object_never_resolves_to_a_reused_segment(
    shm: SharedMemoryConnector,
) -> None:
    with Store('pool-proxy', shm, cache_size=0) as store:
        p = store.proxy(_data(1), evict=True, populate_target=False)
        again = store.proxy_from_key(get_key(p))
        assert len(p) == LARGE  # resolves, then evicts into the pool
        store.put(_data(2))  # reuses the segment
        with pytest.raises(ProxyResolveMissingKeyError):
            len(again)


def test_concurrent_puts_gets_and_evicts_only_ever_see_their_own_bytes(
    shm: SharedMemoryConnector,
) -> None:
    from tether.testing.threads import hammer

    latest: dict[int, tuple[SharedMemoryKey, int, int]] = {}

    def work(thread: int, call: int) -> None:
        tag = thread * 1000 + call
        size = LARGE + (call % 3) * 4096
        key = shm.put(_data(tag, size))
        latest[thread] = (key, tag, size)
        other = latest.get((thread + 1) % 4)
        if other is not None:
            got = shm.get(other[0])  # its thread may be evicting it meanwhile
            assert got is None or bytes(got) == _data(other[1], other[2])
        assert bytes(shm.get(key)) == _data(tag, size)
        shm.evict(key)
        assert shm.get(key) is None

    hammer(work, threads=4, calls=25)


def test_a_segment_with_another_header_raises(shm: SharedMemoryConnector) -> None:
    key = shm.put(_data(1))
    with open(os.path.join(SHM_DIR, key.name), 'r+b') as f:
        f.write(b'garbage!')
    with pytest.raises(ConnectorError, match='header'):
        shm.get(key)


def test_a_full_dev_shm_empties_the_pool_and_retries(
    shm: SharedMemoryConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    shm.evict(shm.put(_data(1, 3 * LARGE)))  # a pooled segment of another size class
    assert len(_pool_entries(shm.namespace)) == 1
    real_write = _shm_pool.write
    calls: list[int] = []

    def full_once(*args: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise OSError(errno.ENOSPC, 'No space left on device')
        real_write(*args)

    monkeypatch.setattr(_shm_pool, 'write', full_once)
    key = shm.put(_data(2))
    assert len(calls) == 2
    assert _pool_entries(shm.namespace) == []
    assert bytes(shm.get(key)) == _data(2)


# No leaks ----------------------------------------------------------------------------


def test_close_empties_the_pool(shm_namespace: str) -> None:
    with SharedMemoryConnector(shm_namespace) as c:
        keep = c.put(b'kept')
        c.evict(c.put(_data(1)))
        c.evict(c.put(_data(2, 4 * LARGE)))
        assert len(_pool_entries(shm_namespace)) == 2
    assert [name for name, _ in segments(shm_namespace)] == [keep.name]
    assert not os.path.exists(os.path.join(SHM_DIR, f'tether-{shm_namespace}-pool'))


def test_clear_and_cleanup_remove_the_pool(shm_namespace: str) -> None:
    c = SharedMemoryConnector(shm_namespace)
    c.put(_data(1))
    c.evict(c.put(_data(2)))
    listed = CliRunner().invoke(cli, ['shm', 'clean', '--namespace', shm_namespace, '--list'])
    assert f'tether-{shm_namespace}-pool/' in listed.output
    assert '2 shared-memory segment(s)' in listed.output
    assert cleanup(shm_namespace) == 2
    assert segments(shm_namespace) == []
    assert not [n for n in os.listdir(SHM_DIR) if n.startswith(f'tether-{shm_namespace}-')]
    c.evict(c.put(_data(3)))
    c.close(clear=True)
    assert not [n for n in os.listdir(SHM_DIR) if n.startswith(f'tether-{shm_namespace}-')]


def test_a_process_that_exits_leaves_no_pooled_segment(shm_namespace: str) -> None:
    pool = os.path.join(SHM_DIR, f'tether-{shm_namespace}-pool')
    code = (
        'import os\n'
        'from tether.connectors.shared_memory import SharedMemoryConnector\n'
        f'c = SharedMemoryConnector({shm_namespace!r})\n'
        'for i in range(3):\n'
        f'    c.evict(c.put(bytes([i]) * {LARGE}))\n'
        f'c.evict(c.put(b"y" * {4 * LARGE}))\n'
        f'assert len(os.listdir({pool!r})) == 2\n'
    )
    subprocess.run([sys.executable, '-c', code], check=True, timeout=120)
    assert segments(shm_namespace) == []


def test_an_exiting_process_leaves_other_processes_pooled_segments(shm_namespace: str) -> None:
    c = SharedMemoryConnector(shm_namespace)
    c.evict(c.put(_data(1)))
    code = (
        'from tether.connectors.shared_memory import SharedMemoryConnector\n'
        f'c = SharedMemoryConnector({shm_namespace!r})\n'
        f'c.evict(c.put(b"y" * {4 * LARGE}))\n'
    )
    subprocess.run([sys.executable, '-c', code], check=True, timeout=120)
    assert len(_pool_entries(shm_namespace)) == 1  # this process's, for its next put
    c.close()
    assert segments(shm_namespace) == []


# The writer's mappings ---------------------------------------------------------------


def test_a_writer_copies_into_the_mapping_it_kept(shm: SharedMemoryConnector) -> None:
    _shm_maps.clear()
    shm.evict(shm.put(_data(1)))
    b = shm.put(_data(2))  # claimed from the pool: mapped, and the mapping kept
    assert list(_shm_maps._maps.items) == [(os.stat(SHM_DIR).st_dev, _inode(b))]
    inode = _inode(b)
    shm.evict(b)
    c = shm.put(_data(3, LARGE + 5))
    assert _inode(c) == inode
    assert len(_shm_maps._maps) == 1
    assert bytes(shm.get(c)) == _data(3, LARGE + 5)


def test_mappings_of_removed_segments_are_dropped(shm_namespace: str) -> None:
    _shm_maps.clear()
    c = SharedMemoryConnector(shm_namespace)
    c.evict(c.put(_data(1)))
    c.evict(c.put(_data(2)))
    assert len(_shm_maps._maps) == 1
    c.close()  # empties the pool: the kept mapping must not keep the memory
    assert _shm_maps._maps.items == {}
    c.evict(c.put(_data(1)))
    c.evict(c.put(_data(2)))
    cleanup(shm_namespace)  # from elsewhere: dropped at this process's next write
    c.put(_data(3, 4 * LARGE))
    assert _shm_maps._maps.items == {}
    c.close(clear=True)


@pytest.mark.skipif(not hasattr(os, 'fork'), reason='needs fork')
def test_a_forked_child_starts_without_the_parents_mappings(shm: SharedMemoryConnector) -> None:
    shm.evict(shm.put(_data(1)))
    shm.evict(shm.put(_data(2)))
    assert len(_shm_maps._maps) == 1
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        ok = not _shm_maps._maps.items
        key = shm.put(_data(3))  # claims the pooled segment, maps it itself
        ok = ok and bytes(shm.get(key)) == _data(3) and len(_shm_maps._maps) == 1
        shm.evict(key)
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    b = shm.put(_data(4))
    assert bytes(shm.get(b)) == _data(4)


@pytest.mark.skipif(not hasattr(os, 'fork'), reason='needs fork')
def test_a_child_forked_while_another_thread_holds_the_locks_still_writes(
    shm: SharedMemoryConnector,
) -> None:
    shm.evict(shm.put(_data(1)))
    with named._owned_lock, _shm_maps._maps.lock:  # as if another thread were inside
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            key = shm.put(_data(2))
            ok = bytes(shm.get(key)) == _data(2)
            shm.evict(key)
            os._exit(0 if ok else 1)
    assert child_exit_code(pid, 'the forked child hung on a lock it inherited held') == 0
