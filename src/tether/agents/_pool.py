"""The threads that run an agent's synchronous actions.

Lighter than a ``ThreadPoolExecutor`` (no future per call, one lock): the runtime needs
no result back, an action answers its caller itself.

An idle thread waits on a pipe of its own, and a call is handed to it by writing one byte
there. Writing releases the interpreter lock before it wakes the thread, so a thread
woken on the same CPU can run the action at once. Woken through a lock (a queue), it
would find the lock still held by the thread that handed the call over, sleep again
until that thread released it, and cost two more context switches per call.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

__all__ = ['Workers']

logger = logging.getLogger(__name__)

_Call = tuple[Callable[[Any], None], Any]


class _Parked:
    """An idle thread's pipe, and the call handed to it (``None``: stop).

    Without a free file descriptor for the pipe, a lock stands in for it.
    """

    __slots__ = ('call', 'lock', 'r', 'w')

    def __init__(self) -> None:
        self.call: _Call | None = None
        self.lock: threading.Lock | None = None
        try:
            self.r, self.w = os.pipe()
        except OSError:
            self.r = self.w = -1
            self.lock = threading.Lock()
            self.lock.acquire()

    def wait(self) -> None:
        if self.lock is not None:
            self.lock.acquire()
        else:
            os.read(self.r, 1)

    def wake(self) -> None:
        if self.lock is not None:
            self.lock.release()
        else:
            os.write(self.w, b'.')

    def close(self) -> None:
        if self.lock is None:
            os.close(self.r)
            os.close(self.w)


class Workers:
    """Threads that run calls, started as needed up to ``limit``; calls beyond wait.

    Args:
        limit: Most threads.
        name: Prefix of the threads' names.
    """

    def __init__(self, limit: int, name: str) -> None:
        self._limit = limit
        self._name = name
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._parked: list[_Parked] = []
        self._backlog: collections.deque[_Call] = collections.deque()
        self._closed = False

    def submit(self, fn: Callable[[Any], None], arg: Any) -> None:
        """Run ``fn(arg)`` in a worker thread.

        Raises:
            RuntimeError: once :meth:`shutdown` was called.
        """
        with self._lock:
            if self._closed:
                raise RuntimeError('the action threads are shut down')
            if not self._parked:
                self._backlog.append((fn, arg))
                if len(self._threads) < self._limit:
                    thread = threading.Thread(
                        target=self._run,
                        name=f'{self._name}_{len(self._threads)}',
                        daemon=True,
                    )
                    self._threads.append(thread)
                    thread.start()
                return
            parked = self._parked.pop()
            parked.call = (fn, arg)
        parked.wake()

    def _run(self) -> None:
        parked = _Parked()
        try:
            while True:
                with self._lock:
                    if self._backlog:
                        call: _Call | None = self._backlog.popleft()
                    elif self._closed:
                        return
                    else:
                        call = parked.call = None
                        self._parked.append(parked)
                if call is None:
                    parked.wait()
                    call = parked.call
                    if call is None:
                        return
                fn, arg = call
                try:
                    fn(arg)
                except BaseException:
                    logger.exception('an action thread failed')
                del call, fn, arg
        finally:
            parked.close()

    def shutdown(self) -> None:
        """Let waiting calls run, then stop the threads and wait for them."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
            parked, self._parked = self._parked, []
        for idle in parked:
            idle.wake()  # its call is None: it stops
        for thread in threads:
            thread.join()
