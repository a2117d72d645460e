"""A thread waiting for an action's result sleeps on a pipe of its own.

The thread that settles the future (the exchange's server thread, usually) wakes it by
writing one byte. Writing releases the interpreter lock before the wake-up, so a waiter
woken on the same CPU takes over at once. Woken through a lock (a ``Condition``, as
``concurrent.futures`` does), it would find the interpreter lock still held by the
settling thread, sleep again until that thread released it, and cost two more context
switches per result.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time

__all__ = ['Waker', 'thread_waker']


class Waker:
    """One thread's pipe: :meth:`wait` sleeps until :meth:`wake` (or a deadline)."""

    __slots__ = ('pid', 'r', 'w')

    def __init__(self) -> None:
        self.r = self.w = -1
        self.r, self.w = os.pipe()
        os.set_blocking(self.r, False)
        os.set_blocking(self.w, False)
        self.pid = os.getpid()

    def wake(self) -> None:
        """Wake the thread (at once if it waits, else its next wait returns early)."""
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self.w, b'.')  # a full pipe wakes it as well

    def wait(self, deadline: float | None) -> None:
        """Sleep until woken or until ``deadline`` (``time.monotonic()``); may return early.

        The wake-up stays in the pipe (no read on the way back to the caller): callers
        :meth:`drain` before they wait again, and check their condition after each wait.
        """
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        select.select([self.r], [], [], timeout)

    def drain(self) -> None:
        """Forget wake-ups that are in the pipe."""
        with contextlib.suppress(BlockingIOError):
            os.read(self.r, 4096)

    def close(self) -> None:
        for fd in (self.r, self.w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.r = self.w = -1

    def __del__(self) -> None:
        self.close()


_local = threading.local()


def thread_waker() -> Waker | None:
    """This thread's waker (made on first use; a forked child makes its own).

    ``None`` when no pipe can be made (no free file descriptor): wait another way.
    """
    waker: Waker | None = getattr(_local, 'waker', None)
    if waker is None or waker.pid != os.getpid():
        if waker is not None:
            waker.close()  # the parent's pipe: this process's copies only
        try:
            waker = Waker()
        except OSError:
            return None
        _local.waker = waker
    return waker
