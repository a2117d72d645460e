"""The clock that code which waits or expires reads, so that tests can replace it.

Lifetimes, futures, agent timers and retries take ``clock=``: a :class:`Clock`. The
default, :data:`SYSTEM_CLOCK`, is the machine's (``time.monotonic``, ``time.time``,
``time.sleep``). :class:`FakeClock` (public as ``tether.testing.FakeClock``) is a clock
that moves only when a test calls :meth:`FakeClock.advance`: a 0.3 s lease is tested by
advancing 0.3 s, not by sleeping.

A waiting loop is written against the clock, not against ``time``::

    deadline = clock.monotonic() + timeout
    with cond:
        while not ready():
            remaining = deadline - clock.monotonic()
            if remaining <= 0:
                raise TimeoutError
            clock.wait(cond, remaining)

``clock.wait`` may return early (a notify, or the fake clock advancing), so the loop
checks its condition and its deadline again, as any ``Condition.wait`` loop must.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Protocol, runtime_checkable

__all__ = ['SYSTEM_CLOCK', 'Clock', 'FakeClock', 'SystemClock']


@runtime_checkable
class Clock(Protocol):
    """What code that waits or expires needs of time."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (for deadlines and durations)."""
        ...

    def time(self) -> float:
        """Seconds since the epoch (for timestamps others read)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block the calling thread for ``seconds`` of this clock."""
        ...

    def wait(self, cond: threading.Condition, timeout: float | None) -> bool:
        """``cond.wait(timeout)`` measured on this clock (``cond`` held by the caller).

        Returns False when the timeout passed, True otherwise; may return early.
        """
        ...

    async def asleep(self, seconds: float) -> None:
        """Suspend the calling coroutine for ``seconds`` of this clock."""
        ...


class SystemClock:
    """The machine's clock."""

    __slots__ = ()

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def wait(self, cond: threading.Condition, timeout: float | None) -> bool:
        return cond.wait(None if timeout is None else max(0.0, timeout))

    async def asleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def __repr__(self) -> str:
        return 'SystemClock()'


SYSTEM_CLOCK: Clock = SystemClock()
"""The default clock of everything that takes ``clock=``."""


class FakeClock:
    """A clock that moves only when :meth:`advance` is called (for tests).

    Threads blocked in :meth:`sleep` or :meth:`wait` and coroutines in :meth:`asleep`
    wake when the clock reaches their deadline; a :meth:`wait` also wakes on a notify of
    its condition, as with the system clock.

    Args:
        start: The clock's first reading of :meth:`monotonic`.
        epoch: What :meth:`time` reads when :meth:`monotonic` reads ``start``.
    """

    def __init__(self, start: float = 0.0, *, epoch: float = 1_700_000_000.0) -> None:
        self._now = start
        self._offset = epoch - start
        self._lock = threading.Lock()
        self._moved = threading.Condition(self._lock)
        self._conds: list[threading.Condition] = []
        self._loops: dict[asyncio.AbstractEventLoop, set[asyncio.Event]] = {}
        self._sleepers = 0

    def monotonic(self) -> float:
        with self._lock:
            return self._now

    def time(self) -> float:
        with self._lock:
            return self._now + self._offset

    @property
    def sleepers(self) -> int:
        """How many threads and coroutines are blocked on this clock now.

        A test that must not advance before the code under test waits can wait for
        this to reach a number (with :meth:`wait_for_sleepers`).
        """
        with self._lock:
            return self._sleepers

    def wait_for_sleepers(self, n: int, timeout: float = 30.0) -> None:
        """Block (in real time, at most ``timeout`` s) until ``n`` waiters are blocked here."""
        with self._moved:
            if not self._moved.wait_for(lambda: self._sleepers >= n, timeout):
                raise TimeoutError(f'{self._sleepers} waiters on the fake clock, expected {n}')

    def advance(self, seconds: float) -> None:
        """Move the clock forward and wake every waiter whose deadline has come."""
        if seconds < 0:
            raise ValueError(f'a clock does not go back (advance({seconds}))')
        with self._lock:
            self._now += seconds
            self._moved.notify_all()
            conds = list(dict.fromkeys(self._conds))
            loops = {loop: list(events) for loop, events in self._loops.items()}
        for cond in conds:
            with cond:
                cond.notify_all()
        for loop, events in loops.items():
            for event in events:
                loop.call_soon_threadsafe(event.set)

    def sleep(self, seconds: float) -> None:
        with self._moved:
            deadline = self._now + seconds
            self._sleepers += 1
            self._moved.notify_all()
            try:
                while self._now < deadline:
                    self._moved.wait()
            finally:
                self._sleepers -= 1

    def wait(self, cond: threading.Condition, timeout: float | None) -> bool:
        with self._lock:
            deadline = None if timeout is None else self._now + timeout
            self._conds.append(cond)
            self._sleepers += 1
            self._moved.notify_all()
        try:
            cond.wait()
        finally:
            with self._lock:
                self._sleepers -= 1
                self._conds.remove(cond)
                self._moved.notify_all()
                in_time = deadline is None or self._now < deadline
        return in_time

    async def asleep(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            deadline = self._now + seconds
        while True:
            event = asyncio.Event()
            with self._lock:
                if self._now >= deadline:
                    return
                self._loops.setdefault(loop, set()).add(event)
                self._sleepers += 1
                self._moved.notify_all()
            try:
                await event.wait()
            finally:
                with self._lock:
                    self._sleepers -= 1
                    self._loops.get(loop, set()).discard(event)
                    self._moved.notify_all()

    def __repr__(self) -> str:
        return f'FakeClock(now={self.monotonic()})'
