"""The object servers' accounting of bytes in flight: requests still being received.

A payload is allocated only once the budget can take it, counting every other payload
still in flight; when memory cannot take it, it is written straight to a spill file as it
arrives; when the spill directory cannot take it either, the frame is refused before
anything is allocated. Payloads of a connection that dies midway are released at once.
"""

from __future__ import annotations

import logging
import shutil
from typing import Any

from tether._serve.objects import BufferPool, ObjectTable, SpillFile
from tether._serve.sizes import format_size
from tether._wire import MemoryBudget
from tether.exceptions import FrameTooLargeError

__all__ = ['NodeMemory']

logger = logging.getLogger(__name__)

_DISK_RESERVE = 64 << 20


class NodeMemory(MemoryBudget):
    """Allocates received payloads within an :class:`ObjectTable`'s memory budget.

    The wire's :class:`~tether._wire.MemoryBudget`, whose limit is the table's: the
    objects the table keeps in memory count against it (:meth:`held`), least recently
    used ones are spilled to make room (:meth:`make_room`), and a payload that still does
    not fit is received into a spill file (:meth:`overflow`), refused only when the
    spill directory cannot take it either.

    Attributes:
        inflight: Bytes of payloads allocated in memory and not yet released (the
            budget's ``reserved``).
        disk_inflight: Bytes of payloads being written to spill files.
    """

    def __init__(self, table: ObjectTable, pool: BufferPool) -> None:
        super().__init__(table.memory_limit, alloc=pool.take, name='object server')
        self.table = table
        self.pool = pool
        self.disk_inflight = 0

    @property
    def inflight(self) -> int:
        """Bytes of payloads allocated in memory and not yet released."""
        return self.reserved

    @inflight.setter
    def inflight(self, value: int) -> None:
        self.reserved = value

    def held(self) -> int:
        """Bytes of the objects the table keeps in memory."""
        return self.table.memory_used

    def make_room(self, size: int) -> None:
        """Spill least recently used objects until ``size`` bytes (in flight) fit too."""
        self.table.make_room(size)

    def overflow(self, size: int) -> Any:
        """Receive a payload the memory budget cannot take into a spill file, or refuse it."""
        table = self.table
        directory = table.spill_dir
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        free = shutil.disk_usage(directory).free - self.disk_inflight - _DISK_RESERVE
        if size > free:
            self.refused += 1
            raise FrameTooLargeError(
                f'a payload of {format_size(size)} fits neither the memory budget '
                f'({format_size(table.memory_limit)}, {format_size(self.reserved)} in flight) '
                f'nor the free space of the spill directory ({format_size(max(free, 0))})',
            )
        sink = SpillFile(directory, size)
        self.disk_inflight += size
        logger.debug('receiving %d bytes straight to %s', size, sink.path)
        return sink

    def release(self, payloads: list[Any]) -> None:
        """Stop counting a frame's payloads; remove spill files that were never put."""
        for payload in payloads:
            if isinstance(payload, SpillFile):
                self.disk_inflight -= payload.size
                payload.discard()
            else:
                self.reserved -= len(payload)
