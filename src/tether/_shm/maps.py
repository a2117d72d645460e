"""The mappings a process keeps of shared-memory slots, and the writer's and reader's use of them.

Writing 10 MB into a pooled segment with ``pwritev`` costs ~1.6 ms (the kernel looks up
each 4 KB page of the file); copying it into a mapping whose pages are already mapped
costs ~1 ms, but mapping the segment afresh for each put brings a page fault per page back.
So a writer keeps the mappings of the segments it wrote, keyed by inode: when a put claims
a segment this process wrote before (the common case: one segment going round between a
producer and the consumers that evict it), it copies into the mapping it has.

Readers keep mappings too (read-only ones), for objects that are copied out as they are
read (:func:`lend`: a ``bytes`` object, a string ...): mapping a 10 MB segment afresh
for each read costs a page fault per 16 pages and an unmap (~1.5 ms for the read of
10 MB against ~0.7 ms through a mapping kept, its pages mapped once).

Both keep them in a :class:`MappingCache`, as the anonymous backing's readers keep
theirs (:class:`tether._shm.memfd.PeerMappings`): least recently used first out, bounded
by count and bytes, an entry taken out while it is used.

The mappings hold no lock (see :mod:`tether._shm.named`): a writer uses one
only while it holds the segment's exclusive lock through another open file, a reader
only while it holds a shared lock the same way, and neither lets anything refer to the
mapping once it has let go of the lock. A mapping keeps its file's memory even after the
file is unlinked, so the mappings of unlinked files are dropped at every pooled write
and read of the process (:func:`prune`) and when a connector closes. At most
:data:`MAX_MAPPINGS` mappings and :data:`MAX_BYTES` bytes are kept. A forked child
starts with none.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import mmap
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from tether.serialize import BytesLike

__all__ = ['MAX_BYTES', 'MAX_MAPPINGS', 'MappingCache', 'clear', 'lend', 'prune', 'write']

MAX_MAPPINGS = 8
MAX_BYTES = 256 << 20
_MADV_POPULATE_READ = 22
_MADV_POPULATE_WRITE = 23
_PAGE = mmap.PAGESIZE
_GIL_FREE_MIN = 256 << 10
"""Larger copies go through ``ctypes.memmove``, which releases the GIL."""

R = TypeVar('R')
K = TypeVar('K')
E = TypeVar('E')


class MappingCache(Generic[K, E]):
    """Mappings kept for reuse, least recently used first out (thread-safe).

    An entry in use is taken out (:meth:`take`) and put back after (:meth:`keep`), so
    that no other thread closes it meanwhile. A forked child starts empty.

    Args:
        entries: Most entries kept.
        nbytes: Most bytes kept (as ``size`` counts them).
        size: The bytes of an entry.
        close: Frees an entry dropped.
        keep_newest: Keep the entry just kept even if it alone passes the bounds.
    """

    def __init__(
        self,
        *,
        entries: int,
        nbytes: int,
        size: Callable[[E], int],
        close: Callable[[E], None],
        keep_newest: bool = False,
    ) -> None:
        self.entries = entries
        self.nbytes = nbytes
        self._size = size
        self._close = close
        self._least = 1 if keep_newest else 0
        self.lock = threading.Lock()
        self.items: collections.OrderedDict[K, E] = collections.OrderedDict()
        self._bytes = 0
        _caches.add(self)

    def __len__(self) -> int:
        return len(self.items)

    def get(self, key: K) -> E | None:
        """The entry of ``key``, left in (now the newest), or ``None``: for an owner that
        closes nothing it may still use (a single-threaded reader)."""
        with self.lock:
            entry = self.items.get(key)
            if entry is not None:
                self.items.move_to_end(key)
            return entry

    def take(self, key: K) -> E | None:
        """Take the entry of ``key`` out, or ``None``."""
        with self.lock:
            entry = self.items.pop(key, None)
            if entry is not None:
                self._bytes -= self._size(entry)
            return entry

    def keep(self, key: K, entry: E) -> None:
        """Put ``entry`` in (newest), dropping the oldest while over the bounds."""
        dropped = []
        with self.lock:
            other = self.items.pop(key, None)  # made by another thread meanwhile
            if other is not None:
                self._bytes -= self._size(other)
                dropped.append(other)
            self.items[key] = entry
            self._bytes += self._size(entry)
            while len(self.items) > self._least and (
                len(self.items) > self.entries or self._bytes > self.nbytes
            ):
                old = self.items.popitem(last=False)[1]
                self._bytes -= self._size(old)
                dropped.append(old)
        for old in dropped:
            self._close(old)

    def drop(self, stale: Callable[[E], bool]) -> None:
        """Drop (and close) the entries ``stale`` says are."""
        with self.lock:
            gone = [k for k, e in self.items.items() if stale(e)]
            entries = [self.items.pop(k) for k in gone]
            self._bytes -= sum(self._size(e) for e in entries)
        for entry in entries:
            self._close(entry)

    def clear(self) -> None:
        """Drop every entry."""
        self.drop(lambda _: True)

    def forget_in_child(self) -> None:
        """After a fork, in the child: a new lock, and no entries."""
        self.lock = threading.Lock()
        self.clear()


_caches: weakref.WeakSet[Any] = weakref.WeakSet()

_Entry = tuple[int, mmap.mmap, bool]
"""An open file of the segment, a mapping of it, and whether the mapping is writable."""


def _close(entry: _Entry) -> None:
    fd, mapping, _ = entry
    with contextlib.suppress(BufferError, ValueError):
        mapping.close()
    with contextlib.suppress(OSError):
        os.close(fd)


def _unlinked(entry: _Entry) -> bool:
    try:
        return os.fstat(entry[0]).st_nlink == 0
    except OSError:
        return True


_maps: MappingCache[tuple[int, int], _Entry] = MappingCache(
    entries=MAX_MAPPINGS, nbytes=MAX_BYTES, size=lambda e: len(e[1]), close=_close
)
"""The mappings of named segments this process wrote or read, keyed by inode."""


def prune() -> None:
    """Drop the mappings of segments that no longer have a name (their memory goes)."""
    _maps.drop(_unlinked)


def clear() -> None:
    """Drop every mapping."""
    _maps.clear()


def write(path: str, fd: int, buffers: list[memoryview]) -> None:
    """Copy ``buffers`` to the start of the segment open as ``fd`` (named ``path``).

    The caller holds the segment's exclusive lock (on ``fd``); the mapping comes from a
    file of its own (``path`` opened again), which holds no lock.
    """
    st = os.fstat(fd)
    ident = (st.st_dev, st.st_ino)
    entry = _maps.take(ident)
    if entry is not None and (len(entry[1]) != st.st_size or not entry[2]):
        _close(entry)  # of another size, or a reader's (read-only)
        entry = None
    if entry is None:
        own = os.open(path, os.O_RDWR)
        try:
            mapping = mmap.mmap(own, st.st_size)
        except BaseException:
            os.close(own)
            raise
        entry = (own, mapping, True)
        size = sum(v.nbytes for v in buffers)
        # Map the pages to be written in one call rather than one fault per page (not
        # the whole segment: its sparse tail would be allocated).
        with contextlib.suppress(OSError, ValueError):
            mapping.madvise(_MADV_POPULATE_WRITE, 0, min(len(mapping), -(-size // _PAGE) * _PAGE))
    try:
        _copy(entry[1], buffers)
    except BaseException:
        _close(entry)
        raise
    _maps.keep(ident, entry)


def _reader_entry(path: str, st: os.stat_result, end: int) -> _Entry | None:
    """A new read-only mapping of the segment ``st`` (named ``path``), its first ``end``
    bytes mapped; ``None`` if ``path`` now names another file."""
    try:
        own = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        mine = os.fstat(own)
        if (mine.st_dev, mine.st_ino) != (st.st_dev, st.st_ino):
            os.close(own)
            return None
        mapping = mmap.mmap(own, st.st_size, access=mmap.ACCESS_READ)
    except BaseException:
        os.close(own)
        raise
    # One call maps the pages to be read instead of a fault per 16 pages (not the whole
    # segment: reading its sparse tail would allocate it).
    with contextlib.suppress(OSError, ValueError):
        mapping.madvise(_MADV_POPULATE_READ, 0, min(len(mapping), -(-end // _PAGE) * _PAGE))
    return (own, mapping, False)


def lend(
    path: str,
    fd: int,
    start: int,
    size: int,
    *,
    keep: Callable[[], BytesLike],
    use: Callable[[memoryview, Callable[[], BytesLike]], R],
) -> R:
    """Return ``use(view, keep)``, ``view`` being bytes ``start:start + size`` of the
    segment open as ``fd`` (named ``path``), read-only, through a mapping kept.

    The caller holds the segment's shared lock (on ``fd``) until this returns; the view
    is released when ``use`` returns, and ``use`` must keep nothing that refers to it
    (``keep`` is passed on as it is, for a ``use`` that needs memory of its own).
    """
    st = os.fstat(fd)
    ident = (st.st_dev, st.st_ino)
    entry = _maps.take(ident)
    if entry is not None and len(entry[1]) != st.st_size:
        _close(entry)
        entry = None
    if entry is None:
        entry = _reader_entry(path, st, start + size)
        if entry is None:
            return use(memoryview(keep()).toreadonly(), keep)
    try:
        with (
            memoryview(entry[1]) as whole,
            whole[start : start + size] as part,
            part.toreadonly() as view,
        ):
            return use(view, keep)
    finally:
        _maps.keep(ident, entry)


def _copy(mapping: mmap.mmap, buffers: list[memoryview]) -> None:
    base = ctypes.c_char.from_buffer(mapping)
    try:
        address = ctypes.addressof(base)
        offset = 0
        for view in buffers:
            n = view.nbytes
            source = _source(view) if n >= _GIL_FREE_MIN else None
            if source is None:
                mapping[offset : offset + n] = view
            else:
                ctypes.memmove(address + offset, source, n)
            offset += n
    finally:
        del base  # releases the export, so that the mapping can be closed


def _source(view: memoryview) -> ctypes.Array[ctypes.c_char] | bytes | None:
    """What ``ctypes.memmove`` can read ``view`` from, or ``None`` (then: a slice copy)."""
    if not view.c_contiguous:
        return None
    if not view.readonly:
        return (ctypes.c_char * view.nbytes).from_buffer(view)
    if type(view.obj) is bytes and len(view.obj) == view.nbytes:
        return view.obj
    return None


def _forget_in_child() -> None:
    for cache in list(_caches):
        cache.forget_in_child()


if hasattr(os, 'register_at_fork'):
    os.register_at_fork(after_in_child=_forget_in_child)
