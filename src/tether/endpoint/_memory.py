"""The endpoint's accounting of bytes in flight: the node server's, shared by both servers.

A frame's head claims its payloads' sizes before any of their bytes arrive. The client
server and the peer server (which also serves client connections spliced onto a peer
channel, see ``CHANNEL``) allocate every frame they receive through one
:class:`EndpointMemory`, the node server's :class:`~tether._serve.memory.NodeMemory`: a
payload is held in memory only if the budget can take it, counting every payload still
in flight; otherwise it is written to a spill file as it arrives; a frame the spill
directory cannot take either is refused before anything is allocated. Payloads of a
connection that dies midway are given back at once.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Sequence
from typing import Any

from tether._serve.memory import NodeMemory
from tether._serve.objects import SpillFile
from tether._wire import Frame
from tether.endpoint._pipe import PipeSlice

__all__ = ['EndpointMemory', 'in_memory']


class EndpointMemory(NodeMemory):
    """:class:`NodeMemory`, for a server whose router pipes some frames elsewhere.

    The payloads of a piped frame (a large ``PUT`` passed on to its owner as it arrives)
    were never allocated here: releasing them changes nothing.
    """

    def allocate(self, sizes: Sequence[int]) -> list[Any]:
        """Allocate one frame's payloads (see :meth:`NodeMemory.allocate`)."""
        if not sizes:
            return []
        if len(sizes) == 1:
            # The usual request (one object) while the budget has room: the same
            # decision as NodeMemory's, in fewer steps (a request is a few microseconds).
            n = sizes[0]
            table = self.table
            if table.memory_used + self.reserved + n <= table.memory_limit:
                self.reserved += n
                return [self.pool.take(n)]
        return super().allocate(sizes)

    def release(self, payloads: list[Any]) -> None:
        """Stop counting a frame's payloads (those piped elsewhere were never counted)."""
        if not payloads:
            return
        first = payloads[0]
        if type(first) is bytearray and len(payloads) == 1:
            self.reserved -= len(first)
        elif not isinstance(first, PipeSlice):  # a piped frame's are all pipe slices
            super().release(payloads)


def in_memory(frame: Frame) -> Frame:
    """``frame``, with every payload received into a spill file mapped read-only.

    For a frame that is passed on (forwarded to its owner) rather than stored: its
    payloads must be buffers. The spill files' pages come from the page cache, not the
    endpoint's memory; the frame itself keeps its spill files, which the server releases
    (and removes) once the frame is handled.
    """
    payloads = frame.payloads
    if all(type(p) is not SpillFile for p in payloads):
        return frame
    mapped: list[Any] = []
    for p in payloads:
        if type(p) is SpillFile and p.size:
            fd = os.open(p.path, os.O_RDONLY)
            try:
                mapped.append(mmap.mmap(fd, p.size, access=mmap.ACCESS_READ))
            finally:
                os.close(fd)
        else:
            mapped.append(p if type(p) is not SpillFile else bytearray())
    return Frame(frame.type, frame.header, mapped, frame.request_id, frame.flags, frame.version)
