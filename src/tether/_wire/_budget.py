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
from typing import Any, NoReturn

from tether.exceptions import FrameTooLargeError

__all__ = ['MemoryBudget']


class MemoryBudget:
    """Bytes of received payloads a server holds at once, over all its connections.

    Implements :class:`~tether._wire._proto.FrameMemory` (pass it as
    ``Server(memory=...)``). :meth:`reserve` and :meth:`unreserve` are public so that a
    server with its own allocation (a router, a pool, a store) can count a size claim
    against the same budget before it reserves memory for it.

    The one design of every server's memory budget: a server that also keeps what it
    received (the object servers, :class:`tether._serve.memory.NodeMemory`) counts what
    it holds against the same limit (:meth:`held`), frees some of it for a new payload
    (:meth:`make_room`), and puts a payload that does not fit somewhere else instead of
    refusing it (:meth:`overflow`: a spill file).

    Args:
        limit: Most bytes reserved at once.
        alloc: Allocates one payload buffer once its bytes are reserved.
        name: Used in error messages (the server's name).

    Attributes:
        reserved: Bytes reserved now (claims of frames being received or handled).
        peak: The most bytes ever reserved at once.
        refused: Frames refused because their claim did not fit.
    """

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

    def held(self) -> int:
        """Bytes held outside this budget's reservations that count against its limit
        (objects a store keeps); none here."""
        return 0

    def make_room(self, size: int) -> None:
        """Free what is held (see :meth:`held`) until ``size`` more bytes fit; nothing here."""

    def fits(self, size: int) -> bool:
        """Whether ``size`` more bytes can be reserved now (after :meth:`make_room`)."""
        if size > self.limit - self.reserved:
            return False
        self.make_room(self.reserved + size)
        return self.held() + self.reserved + size <= self.limit

    def reserve(self, size: int) -> None:
        """Count ``size`` bytes against the budget, or refuse them.

        Raises:
            FrameTooLargeError: the bytes do not fit (nothing is counted then).
        """
        if not self.fits(size):
            self.refuse(size)
        self.reserved += size
        self.peak = max(self.peak, self.reserved)

    def unreserve(self, size: int) -> None:
        """Give back ``size`` bytes counted by :meth:`reserve`."""
        self.reserved -= size

    def overflow(self, size: int) -> Any:
        """A payload of ``size`` bytes that the budget cannot take: refuse it, or (in a
        subclass) return where else it is received (a spill file).

        Raises:
            FrameTooLargeError: always, here (see :meth:`refuse`).
        """
        self.refuse(size)

    def refuse(self, size: int) -> NoReturn:
        """Count a refused claim of ``size`` bytes and raise.

        Raises:
            FrameTooLargeError: always.
        """
        self.refused += 1
        raise FrameTooLargeError(
            f'{self.name}: a payload of {size} bytes does not fit its memory budget '
            f'({self.limit} bytes, {self.reserved} held by frames in flight): refused '
            'before anything was allocated; retry later, or send smaller frames',
        )

    def allocate(self, sizes: Sequence[int]) -> list[Any]:
        """Reserve one frame's payload bytes, then allocate them (see ``FrameMemory``).

        Each payload is reserved and allocated in turn; one that does not fit goes to
        :meth:`overflow`, and if that refuses it, what was allocated is given back.
        """
        out: list[Any] = []
        try:
            for n in sizes:
                if self.fits(n):
                    self.reserved += n
                    self.peak = max(self.peak, self.reserved)
                    out.append(self.alloc(n))
                else:
                    out.append(self.overflow(n))
        except BaseException:
            self.release(out)
            raise
        return out

    def release(self, payloads: list[Any]) -> None:
        """The frame is done with: give back its bytes (payloads it did not make are skipped)."""
        for p in payloads:
            if isinstance(p, bytearray):
                self.reserved -= len(p)
            elif isinstance(p, memoryview):
                self.reserved -= p.nbytes
