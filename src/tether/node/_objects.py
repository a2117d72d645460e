"""The object table of a node server: objects in memory, spilled to disk past a budget."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections import OrderedDict
from pathlib import Path

__all__ = ['ObjectTable']

logger = logging.getLogger(__name__)


class ObjectTable:
    """Objects by id, within a memory budget; least recently used objects spill to disk.

    An object larger than the whole budget goes straight to disk. Spilled objects are
    still served (read back from their file); evicting one deletes its file.

    Args:
        memory_limit: Bytes of object data kept in memory.
        spill_dir: Directory for spilled objects (created when first needed).
    """

    def __init__(self, memory_limit: int, spill_dir: Path) -> None:
        self.memory_limit = memory_limit
        self.spill_dir = spill_dir
        self._memory: OrderedDict[str, bytes] = OrderedDict()
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

    def _spill(self, oid: str, data: bytes) -> None:
        self.spill_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self._path(oid)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view.nbytes:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        self._disk[oid] = len(data)
        self.disk_used += len(data)
        self.spills += 1
        logger.debug('spilled %s (%d bytes) to %s', oid, len(data), path)

    def put(self, oid: str, data: bytes) -> None:
        """Store ``data`` under ``oid`` (replacing any previous object)."""
        self.evict(oid)
        size = len(data)
        if size > self.memory_limit:
            self._spill(oid, data)
            return
        while self.memory_used + size > self.memory_limit and self._memory:
            old, old_data = self._memory.popitem(last=False)
            self.memory_used -= len(old_data)
            self._spill(old, old_data)
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
        self.memory_used = self.disk_used = 0
        shutil.rmtree(self.spill_dir, ignore_errors=True)
