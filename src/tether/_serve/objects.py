"""The object table of a node server: objects in memory, spilled to disk past a budget."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

__all__ = ['BufferPool', 'ObjectTable', 'SpillFile', 'write_file']

logger = logging.getLogger(__name__)


_OWN_REFS = 4


def write_file(path: Path, data: bytes | bytearray | memoryview) -> None:
    """Write ``data`` to a new file at ``path`` (mode 0600), replacing any file there."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view.nbytes:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


class BufferPool:
    """Buffers of evicted objects, kept for the next payload of the same size.

    Fresh memory is expensive (the kernel zero-fills every page on first touch, which
    costs as much as the network copy itself); workloads that put and evict objects of
    recurring sizes (arrays of one shape, step after step) reuse it instead. Only
    buffers of at least ``min_size`` bytes that nothing else references are kept.

    Args:
        capacity: Most bytes kept in the pool.
        min_size: Smaller buffers are left to the allocator.
    """

    def __init__(self, capacity: int, min_size: int = 1 << 20) -> None:
        self.capacity = capacity
        self.min_size = min_size
        self.size = 0
        self.hits = 0
        self._free: dict[int, list[bytearray]] = {}

    def take(self, n: int) -> bytearray:
        """Return a buffer of exactly ``n`` bytes (contents undefined if reused)."""
        free = self._free.get(n)
        if free:
            self.size -= n
            self.hits += 1
            buf = free.pop()
            if not free:
                del self._free[n]
            return buf
        return bytearray(n)

    def give(self, buf: object) -> None:
        """Offer an evicted object's buffer (ignored unless unreferenced and big enough)."""
        # Unreferenced elsewhere: only the callers' variables (ObjectTable.evict or put,
        # _recycle, this frame) and getrefcount's argument hold it.
        if not isinstance(buf, bytearray) or sys.getrefcount(buf) > _OWN_REFS:
            return
        n = len(buf)
        if n < self.min_size or n > self.capacity:
            return
        while self.size + n > self.capacity and self._free:
            size, bufs = next(iter(self._free.items()))
            bufs.pop()
            self.size -= size
            if not bufs:
                del self._free[size]
        self._free.setdefault(n, []).append(buf)
        self.size += n

    def clear(self) -> None:
        """Drop every pooled buffer."""
        self._free.clear()
        self.size = 0


class SpillFile:
    """A payload written to a file in the spill directory as it arrives.

    Used for payloads that the memory budget cannot take: their bytes never sit in
    memory. :meth:`ObjectTable.put` moves the file into place; a file that is never put
    (its connection died) is removed by :meth:`discard`.

    Args:
        directory: The spill directory (a private one: see :class:`ObjectTable`).
        size: Size of the payload.
    """

    def __init__(self, directory: Path, size: int) -> None:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.size = size
        self.path = directory / f'.inflight-{secrets.token_hex(8)}'
        self._fd: int | None = os.open(
            self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600
        )
        self.written = 0

    def __len__(self) -> int:
        return self.size

    def write(self, data: memoryview) -> None:
        """Append received bytes."""
        assert self._fd is not None
        view = data
        while view.nbytes:
            view = view[os.write(self._fd, view) :]
        self.written += data.nbytes

    def commit(self, path: Path) -> None:
        """Close the file and move it to ``path``."""
        self._close()
        os.replace(self.path, path)
        self.path = path

    def discard(self) -> None:
        """Close and remove the file (no error if it was committed or is gone)."""
        if self._fd is None:
            return
        self._close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @property
    def committed(self) -> bool:
        """Whether the file was closed (moved into place or discarded)."""
        return self._fd is None


class ObjectTable:
    """Objects by id, within a memory budget; least recently used objects spill to disk.

    An object larger than the whole budget goes straight to disk. Spilled objects are
    still served (read back from their file); evicting one deletes its file.

    Args:
        memory_limit: Bytes of object data kept in memory.
        spill_dir: Directory for spilled objects (created when first needed).
        pool: Where the buffers of evicted or spilled objects go for reuse.
    """

    def __init__(
        self,
        memory_limit: int,
        spill_dir: Path,
        pool: BufferPool | None = None,
    ) -> None:
        self.memory_limit = memory_limit
        self.spill_dir = spill_dir
        self.pool = pool
        self._memory: OrderedDict[str, bytes | bytearray] = OrderedDict()
        self._disk: dict[str, int] = {}
        self.memory_used = 0
        self.disk_used = 0
        self.spills = 0

    def __len__(self) -> int:
        return len(self._memory) + len(self._disk)

    def __contains__(self, oid: str) -> bool:
        return oid in self._memory or oid in self._disk

    @property
    def spilled(self) -> int:
        """Number of objects currently on disk."""
        return len(self._disk)

    def _path(self, oid: str) -> Path:
        return self.spill_dir / oid

    def _recycle(self, data: bytes | bytearray) -> None:
        if self.pool is not None:
            self.pool.give(data)

    def _spill(self, oid: str, data: bytes | bytearray) -> None:
        self.spill_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self._path(oid)
        write_file(path, data)
        self._disk[oid] = len(data)
        self.disk_used += len(data)
        self.spills += 1
        logger.debug('spilled %s (%d bytes) to %s', oid, len(data), path)

    def make_room(self, size: int) -> None:
        """Spill least recently used objects until ``size`` more bytes fit the budget."""
        while self.memory_used + size > self.memory_limit and self._memory:
            old, old_data = self._memory.popitem(last=False)
            self.memory_used -= len(old_data)
            self._spill(old, old_data)
            self._recycle(old_data)

    def put(self, oid: str, data: Any) -> None:
        """Store ``data`` under ``oid`` (replacing any previous object).

        ``data`` is a bytes-like object, or a ``SpillFile`` (already on disk).
        """
        self.evict(oid)
        size = len(data)
        if isinstance(data, SpillFile):
            self.spill_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            data.commit(self._path(oid))
            self._disk[oid] = size
            self.disk_used += size
            self.spills += 1
            return
        if size > self.memory_limit:
            self._spill(oid, data)
            return
        self.make_room(size)
        self._memory[oid] = data
        self.memory_used += size

    def get(self, oid: str) -> bytes | bytearray | None:
        """Return the object (marking it recently used), or ``None``."""
        data = self._memory.get(oid)
        if data is not None:
            self._memory.move_to_end(oid)
            return data
        size = self._disk.get(oid)
        if size is None:
            return None
        buf = bytearray(size)
        with open(self._path(oid), 'rb', buffering=0) as f:
            view = memoryview(buf)
            while view.nbytes:
                n = f.readinto(view)
                if not n:
                    raise OSError(f'spill file of {oid} is truncated')
                view = view[n:]
        return buf

    def evict(self, oid: str) -> None:
        """Remove the object (no error if it is missing)."""
        data = self._memory.pop(oid, None)
        if data is not None:
            self.memory_used -= len(data)
            self._recycle(data)
            return
        size = self._disk.pop(oid, None)
        if size is not None:
            self.disk_used -= size
            with contextlib.suppress(FileNotFoundError):
                self._path(oid).unlink()

    def clear(self) -> None:
        """Drop every object and the spill directory."""
        self._memory.clear()
        self._disk.clear()
        if self.pool is not None:
            self.pool.clear()
        self.memory_used = self.disk_used = 0
        shutil.rmtree(self.spill_dir, ignore_errors=True)
