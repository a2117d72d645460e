"""The shared-memory slot kit (tether._shm): size classes, the budget, allocation and
free, the anonymous backing's lifetime (dies with its process), fork safety."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tests.shm._child import child_exit_code
from tether._shm.maps import MappingCache
from tether._shm.memfd import MemfdPool, PeerMappings, identity, open_peer
from tether._shm.pool import SlotPool, fits, size_class
from tether.exceptions import ConnectorError

needs_memfd = pytest.mark.skipif(not identity(), reason='needs memfd and /proc (Linux)')
PREFIX = 'tether-test-'


class FakeSlot:
    def __init__(self, serial: int, capacity: int) -> None:
        self.serial = serial
        self.capacity = capacity
        self.freed = 0.0
        self.closed = False

    def close(self) -> None:
        self.closed = True


def _pool(kept: int = 1 << 20, inflight: int = 1 << 20) -> SlotPool[FakeSlot]:
    return SlotPool(FakeSlot, kept_bytes=kept, inflight_bytes=inflight, minimum=1024)


def test_size_classes_are_powers_of_two_after_the_header_and_at_least_the_minimum() -> None:
    assert size_class(1) == 1
    assert size_class(1000) == 1024
    assert size_class(1024) == 1024
    assert size_class(1025) == 2048
    assert size_class(1024, header=64) == 2048
    assert size_class(960, header=64) == 1024
    assert size_class(10, minimum=1 << 16) == 1 << 16
    assert fits(0, 1024, 1024)
    assert not fits(1, 1024, 1024)


def test_a_freed_slot_is_reused_for_its_size_class_only() -> None:
    pool = _pool()
    a = pool.take(1000)
    assert (a.serial, a.capacity, pool.inflight) == (1, 1024, 1024)
    pool.give([a])
    assert pool.inflight == 0
    assert pool.take(600) is a  # same class: the free slot
    b = pool.take(3000)  # another class: a new slot
    assert (b.serial, b.capacity, pool.made) == (2, 4096, 2)
    pool.give([a, b])
    assert pool.trim(3600.0) == 0  # freed just now: kept
    assert pool.trim(0.0) == 1024 + 4096
    assert a.closed
    assert b.closed
    assert pool.take(1000) is not a


def test_slots_past_the_kept_budget_are_closed_when_given_back() -> None:
    pool = _pool(kept=2048)
    slots = [pool.take(1024) for _ in range(3)]
    pool.give(slots)
    assert [s.closed for s in slots] == [False, False, True]
    pool.close()
    assert all(s.closed for s in slots)


def test_exhausting_the_budget_is_a_clear_connector_error() -> None:
    pool = _pool(inflight=4096)
    held = [pool.take(2048), pool.take(2048)]
    with pytest.raises(ConnectorError, match=r'4096 bytes are in use.*budget of 4096'):
        pool.take(1)
    pool.give(held[:1])
    assert pool.take(2048) is held[0]  # room again
    pool.close()
    with pytest.raises(ConnectorError, match='closed'):
        pool.take(1)


def test_a_slot_that_cannot_be_made_is_a_connector_error_and_costs_no_budget() -> None:
    def make(serial: int, capacity: int) -> FakeSlot:
        raise OSError(12, 'Cannot allocate memory')

    pool = SlotPool(make, kept_bytes=0, inflight_bytes=4096)
    with pytest.raises(ConnectorError, match='cannot make a shared-memory slot of 4096'):
        pool.take(4000)
    assert pool.inflight == 0


def test_a_mapping_cache_keeps_its_bounds_and_the_newest_if_asked() -> None:
    closed: list[str] = []
    cache: MappingCache[str, int] = MappingCache(
        entries=2, nbytes=100, size=lambda n: n, close=lambda n: closed.append(str(n))
    )
    cache.keep('a', 40)
    cache.keep('b', 40)
    assert cache.take('a') == 40  # in use: out of the cache
    cache.keep('c', 40)
    cache.keep('a', 40)  # back, newest: b goes (over 100 bytes)
    assert list(cache.items) == ['c', 'a']
    assert closed == ['40']
    cache.keep('huge', 500)  # alone over the bound: dropped too
    assert len(cache) == 0
    newest: MappingCache[str, int] = MappingCache(
        entries=2, nbytes=100, size=lambda n: n, close=lambda n: None, keep_newest=True
    )
    newest.keep('huge', 500)
    assert list(newest.items) == ['huge']


@needs_memfd
def test_a_memfd_slot_is_read_by_reference_and_refused_under_another_name() -> None:
    pool = MemfdPool(PREFIX, kept_bytes=1 << 20, inflight_bytes=1 << 20, minimum=1 << 16)
    mappings = PeerMappings(PREFIX, entries=4, nbytes=1 << 30)
    try:
        slot = pool.write(b'abc' * 1000)
        mm, capacity = mappings.map(os.getpid(), slot.fd, pool.token, slot.serial)
        assert capacity == slot.capacity == 1 << 16
        assert mm[: slot.size] == b'abc' * 1000
        assert mappings.map(os.getpid(), slot.fd, pool.token, slot.serial)[0] is mm  # kept
        with pytest.raises(ConnectorError, match='another file'):
            open_peer('tether-other-', os.getpid(), slot.fd, pool.token, slot.serial)
        with pytest.raises(ConnectorError, match='invalid'):
            open_peer(PREFIX, os.getpid(), slot.fd, '../x', slot.serial)
        pool.give([slot])
    finally:
        mappings.close()
        pool.close()


@needs_memfd
def test_a_process_killed_while_it_holds_a_slot_leaks_no_segment() -> None:
    before = set(os.listdir('/dev/shm'))
    script = textwrap.dedent(f"""
        import os, sys, threading
        from tether._shm.memfd import MemfdPool
        pool = MemfdPool({PREFIX!r}, kept_bytes=0, inflight_bytes=1 << 30, minimum=0)
        slot = pool.write(b'held' * 1000)  # taken, never given back
        print(os.getpid(), slot.fd, pool.token, slot.serial, flush=True)
        threading.Event().wait()
    """)
    child = subprocess.Popen([sys.executable, '-c', script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        pid, fd, token, serial = child.stdout.readline().split()
        ref = (int(pid), int(fd), token, int(serial))
        mm, _ = open_peer(PREFIX, *ref)
        assert mm[:8] == b'heldheld'
        mm.close()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(60)
        if child.stdout is not None:
            child.stdout.close()
    with pytest.raises(ConnectorError, match='cannot open'):
        open_peer(PREFIX, *ref)  # gone with its process
    assert set(os.listdir('/dev/shm')) - before == set()  # and it never had a name


@needs_memfd
@pytest.mark.skipif(not hasattr(os, 'fork'), reason='needs fork')
def test_a_forked_child_never_writes_into_its_parents_slots() -> None:
    pool = MemfdPool(PREFIX, kept_bytes=1 << 20, inflight_bytes=1 << 20, minimum=1 << 16)
    kept = pool.write(b'parent' * 100)
    pool.give([kept])  # free in the parent: the child could take it
    lent = pool.write(b'lent' * 25_000)  # in use in the parent (another size class)
    with pool._lock:  # as if another thread were inside when the process forked
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                slot = pool.write(b'child!' * 100)
                ok = slot is not kept and slot is not lent  # a new memfd (the fd may be reused)
                pool.give([slot, lent])  # the parent's lent slot: only this copy is closed
                os._exit(0 if ok else 1)
            except BaseException:
                os._exit(2)
    assert child_exit_code(pid, 'the forked child hung on the lock it inherited held') == 0
    assert kept.mm[:12] == b'parentparent'  # untouched
    assert lent.mm[:8] == b'lentlent'
    assert pool.inflight == lent.capacity
    pool.give([lent])
    assert pool.take(100) is kept  # the parent's pool is whole
    assert pool.take(100_000) is lent
    pool.close()
