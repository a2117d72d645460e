"""Size classes, the memory budget, and the free slots a process keeps for reuse.

Both backings of :mod:`tether._shm` round a slot up to a power of two (:func:`size_class`),
so that a slot freed by one value fits the next value of about the same size, and bound
what they keep for reuse by bytes. :class:`SlotPool` is the in-process form of that: free
slots of one process by size class, a budget of bytes kept free and of bytes in use, idle
slots trimmed, everything dropped in a forked child at the fork (a child that reused the
parent's slots would write into memory its parent still lends out). Its per-message
calls (:meth:`SlotPool.take`, :meth:`SlotPool.give`) make no system call and take one
lock. The named backing keeps its free segments in a directory instead, shared by the
processes of a namespace (:mod:`tether._shm.named`), under the same size classes and a
byte budget checked by :func:`fits`.
"""

from __future__ import annotations

import collections
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from tether.exceptions import ConnectorError

__all__ = ['Slot', 'SlotPool', 'fits', 'size_class']


def size_class(nbytes: int, *, header: int = 0, minimum: int = 0) -> int:
    """The capacity of the slot for ``nbytes`` after a ``header``: a power of two, at
    least ``minimum``."""
    return max(minimum, 1 << (header + nbytes - 1).bit_length())


def fits(held: int, capacity: int, budget: int) -> bool:
    """Whether a slot of ``capacity`` bytes fits a budget of which ``held`` is used."""
    return held + capacity <= budget


class Slot(Protocol):
    """What :class:`SlotPool` needs of a slot: its serial number and capacity, and a way
    to free it."""

    serial: int
    capacity: int
    freed: float

    def close(self) -> None:
        """Give the slot's memory back (its mapping, its file)."""


S = TypeVar('S', bound=Slot)

_pools: weakref.WeakSet[Any] = weakref.WeakSet()


class SlotPool(Generic[S]):
    """The slots of one process, free ones kept by size class for reuse (thread-safe).

    Args:
        make: Makes a new slot from its serial number (from 1, unique in the pool) and
            its capacity; may raise :class:`OSError` (no memory).
        kept_bytes: Most bytes of free slots kept for reuse (more are closed).
        inflight_bytes: Most bytes of slots taken and not yet given back.
        minimum: The smallest capacity of a slot.
    """

    def __init__(
        self,
        make: Callable[[int, int], S],
        *,
        kept_bytes: int,
        inflight_bytes: int,
        minimum: int = 0,
    ) -> None:
        self._make = make
        self.kept_bytes = kept_bytes
        self.inflight_bytes = inflight_bytes
        self.minimum = minimum
        self.pid = os.getpid()
        self._free: dict[int, list[S]] = collections.defaultdict(list)
        self._kept = 0
        self.inflight = 0
        """Bytes of slots taken and not yet given back."""
        self.made = 0
        """How many slots this pool has made (the serial number of the last)."""
        self._inherited = 0
        """Slots of serial number up to this one are a parent process's (after a fork)."""
        self._lock = threading.Lock()
        self.closed = False
        _pools.add(self)

    def take(self, nbytes: int) -> S:
        """A slot of at least ``nbytes``: a free one of its size class, else a new one.

        Raises:
            ConnectorError: if the pool is closed, if the slot would take the bytes in
                use over the budget, or if no new slot can be made (the error says which).
        """
        capacity = size_class(nbytes, minimum=self.minimum)
        slot: S | None = None
        with self._lock:
            if self.closed:
                raise ConnectorError('shared-memory slots: the pool is closed')
            if self.inflight + capacity > self.inflight_bytes:  # fits(), inlined: hot
                raise ConnectorError(
                    f'shared-memory slots: {self.inflight} bytes are in use, a slot of '
                    f'{capacity} more would pass the budget of {self.inflight_bytes} bytes',
                )
            free = self._free.get(capacity)
            if free:
                slot = free.pop()
                self._kept -= capacity
            else:
                self.made += 1
                serial = self.made
            self.inflight += capacity
        if slot is None:
            try:
                slot = self._make(serial, capacity)
            except OSError as e:
                with self._lock:
                    self.inflight -= capacity
                raise ConnectorError(
                    f'cannot make a shared-memory slot of {capacity} bytes: {e}'
                ) from e
        return slot

    def give(self, slots: list[S]) -> None:
        """Give slots back: kept for reuse while the budget allows, else closed."""
        closing = []
        now = time.monotonic()
        with self._lock:
            for slot in slots:
                if slot.serial <= self._inherited:
                    closing.append(slot)  # this process's copy of its parent's slot
                    continue
                self.inflight -= slot.capacity
                if not self.closed and self._kept + slot.capacity <= self.kept_bytes:
                    slot.freed = now
                    self._free[slot.capacity].append(slot)
                    self._kept += slot.capacity
                else:
                    closing.append(slot)
        for slot in closing:
            slot.close()

    def trim(self, idle: float) -> int:
        """Close the free slots unused for ``idle`` seconds; return how many bytes."""
        limit = time.monotonic() - idle
        closing: list[S] = []
        with self._lock:
            for free in self._free.values():
                closing += [s for s in free if s.freed <= limit]
                free[:] = [s for s in free if s.freed > limit]
            freed = sum(s.capacity for s in closing)
            self._kept -= freed
        for slot in closing:
            slot.close()
        return freed

    def close(self) -> None:
        """Close every free slot (slots in use are closed when given back)."""
        with self._lock:
            self.closed = True
            free = [s for slots in self._free.values() for s in slots]
            self._free.clear()
            self._kept = 0
        for slot in free:
            slot.close()

    def forget_parent(self) -> None:
        """In a forked child (no other thread): close this process's copies of the
        parent's free slots and start empty, so that the child never writes into a slot
        its parent uses; the parent's slots in use here are closed when given back."""
        self._lock = threading.Lock()  # another thread may have held it at the fork
        free = [s for slots in self._free.values() for s in slots]
        self._free.clear()
        self._kept = 0
        self.inflight = 0
        self._inherited = self.made
        self.pid = os.getpid()
        for slot in free:
            slot.close()


def _forget_in_child() -> None:
    for pool in list(_pools):
        pool.forget_parent()


if hasattr(os, 'register_at_fork'):
    os.register_at_fork(after_in_child=_forget_in_child)
