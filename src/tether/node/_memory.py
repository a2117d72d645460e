"""The node server's accounting of bytes in flight: requests still being received.

A payload is allocated only once the budget can take it, counting every other payload
still in flight; when memory cannot take it, it is written straight to a spill file as it
arrives; when the spill directory cannot take it either, the frame is refused before
anything is allocated. Payloads of a connection that dies midway are released at once.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from typing import Any

from tether.exceptions import FrameTooLargeError
from tether.node._objects import BufferPool, ObjectTable, SpillFile
from tether.node._sizes import format_size

__all__ = ['NodeMemory']

logger = logging.getLogger(__name__)

_DISK_RESERVE = 64 << 20


class NodeMemory:
    """Allocates received payloads within an :class:`ObjectTable`'s memory budget.

    Implements :class:`tether._wire._proto.FrameMemory`.

    Attributes:
        inflight: Bytes of payloads allocated in memory and not yet released.
        disk_inflight: Bytes of payloads being written to spill files.
    """

    def __init__(self, table: ObjectTable, pool: BufferPool) -> None:
        self.table = table
        self.pool = pool
        self.inflight = 0
        self.disk_inflight = 0

    def allocate(self, sizes: Sequence[int]) -> list[Any]:
        """Allocate one frame's payloads (in memory, else in spill files), or refuse it."""
        out: list[Any] = []
        try:
            for n in sizes:
                out.append(self._one(n))
        except BaseException:
            self.release(out)
            raise
        return out

    def _one(self, n: int) -> Any:
        table = self.table
        if self.inflight + n <= table.memory_limit:
            table.make_room(self.inflight + n)
            if table.memory_used + self.inflight + n <= table.memory_limit:
                self.inflight += n
                return self.pool.take(n)
        directory = table.spill_dir
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        free = shutil.disk_usage(directory).free - self.disk_inflight - _DISK_RESERVE
        if n > free:
            raise FrameTooLargeError(
                f'a payload of {format_size(n)} fits neither the memory budget '
                f'({format_size(table.memory_limit)}, {format_size(self.inflight)} in flight) '
                f'nor the free space of the spill directory ({format_size(max(free, 0))})',
            )
        sink = SpillFile(directory, n)
        self.disk_inflight += n
        logger.debug('receiving %d bytes straight to %s', n, sink.path)
        return sink

    def release(self, payloads: list[Any]) -> None:
        """Stop counting a frame's payloads; remove spill files that were never put."""
        for payload in payloads:
            if isinstance(payload, SpillFile):
                self.disk_inflight -= payload.size
                payload.discard()
            else:
                self.inflight -= len(payload)
