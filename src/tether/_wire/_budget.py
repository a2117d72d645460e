"""A server's memory budget for received frames: size claims are reserved before allocating.

A frame's head says how many payload bytes follow. A server that allocated that much as
soon as it read the head could be made to hold gigabytes by a few heads with no data
behind them. :class:`MemoryBudget` is a :class:`~tether._wire._proto.FrameMemory` that
first reserves the claimed bytes against a fixed budget (shared by every connection of
the server), refuses the frame if they do not fit, and only then allocates; the bytes
are given back when the frame has been handled, or when its connection died first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tether.exceptions import FrameTooLargeError

__all__ = ['MemoryBudget']


class MemoryBudget:
    """Bytes of received payloads a server holds at once, over all its connections.

    Implements :class:`~tether._wire._proto.FrameMemory` (pass it as
    ``Server(memory=...)``). :meth:`reserve` and :meth:`unreserve` are public so that a
    server with its own allocation (a router, a pool, a store) can count a size claim
    against the same budget before it reserves memory for it.

    Args:
        limit: Most bytes reserved at once.
        alloc: Allocates one payload buffer once its bytes are reserved.
        name: Used in error messages (the server's name).

    Attributes:
        reserved: Bytes reserved now (claims of frames being received or handled).
        peak: The most bytes ever reserved at once.
        refused: Frames refused because their claim did not fit.
    """

    __slots__ = ('alloc', 'limit', 'name', 'peak', 'refused', 'reserved')

    def __init__(
        self, limit: int, *, alloc: Callable[[int], bytearray] = bytearray, name: str = 'server'
    ) -> None:
        if limit < 0:
            raise ValueError(f'a memory budget cannot be negative (got {limit})')
        self.limit = limit
        self.alloc = alloc
        self.name = name
        self.reserved = 0
        self.peak = 0
        self.refused = 0

    def reserve(self, size: int) -> None:
        """Count ``size`` bytes against the budget, or refuse them.

        Raises:
            FrameTooLargeError: the bytes do not fit (nothing is counted then).
        """
        if size > self.limit - self.reserved:
            self.refused += 1
            raise FrameTooLargeError(
                f'{self.name}: a frame of {size} payload bytes does not fit its memory budget '
                f'({self.limit} bytes, {self.reserved} held by frames in flight): refused '
                'before anything was allocated; retry later, or send smaller frames',
            )
        self.reserved += size
        self.peak = max(self.peak, self.reserved)

    def unreserve(self, size: int) -> None:
        """Give back ``size`` bytes counted by :meth:`reserve`."""
        self.reserved -= size

    def allocate(self, sizes: Sequence[int]) -> list[Any]:
        """Reserve one frame's payload bytes, then allocate them (see ``FrameMemory``)."""
        total = sum(sizes)
        self.reserve(total)
        try:
            return [self.alloc(n) for n in sizes]
        except BaseException:
            self.unreserve(total)
            raise

    def release(self, payloads: list[Any]) -> None:
        """The frame is done with: give back its bytes (payloads it did not make are skipped)."""
        for p in payloads:
            if isinstance(p, bytearray):
                self.reserved -= len(p)
            elif isinstance(p, memoryview):
                self.reserved -= p.nbytes
