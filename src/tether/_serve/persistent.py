"""The endpoint's objects: the node server's object table, optionally persisted."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from tether._serve.codes import valid_id
from tether._serve.objects import BufferPool, ObjectTable, write_file

__all__ = ['PersistentTable']

logger = logging.getLogger(__name__)


class PersistentTable(ObjectTable):
    """An :class:`ObjectTable` that also writes every object to ``folder``.

    Objects stay in memory within the budget as usual; the file of each object is written
    when it is put and removed when it is evicted, so a restarted endpoint finds every
    object again (served from disk until it is read back).
    """

    def __init__(self, memory_limit: int, folder: Path, pool: BufferPool | None = None) -> None:
        super().__init__(memory_limit, folder, pool)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        for path in folder.iterdir():
            if path.is_file() and valid_id(path.name):
                size = path.stat().st_size
                self._disk[path.name] = size
                self.disk_used += size
            elif path.name.startswith(('.tmp-', '.inflight-')):
                # Left by a crash: an object being written, or a frame being received.
                path.unlink(missing_ok=True)
        logger.info('%d persisted objects found in %s', len(self._disk), folder)

    def put(self, oid: str, data: bytes | bytearray) -> None:
        """Store ``data`` in memory (or spill it) and write it to its file."""
        super().put(oid, data)
        if oid in self._disk:
            return  # spilled straight to its file
        tmp = self.spill_dir / f'.tmp-{oid}'
        write_file(tmp, data)
        os.replace(tmp, self.spill_dir / oid)

    def evict(self, oid: str) -> None:
        """Remove the object from memory and disk."""
        super().evict(oid)
        with contextlib.suppress(FileNotFoundError):
            (self.spill_dir / oid).unlink()

    def _spill(self, oid: str, data: bytes | bytearray) -> None:
        if (self.spill_dir / oid).exists():
            # Already written through: only move the bookkeeping to disk.
            self._disk[oid] = len(data)
            self.disk_used += len(data)
            self.spills += 1
            return
        super()._spill(oid, data)
