"""Evicting finished tasks' proxied inputs off the Thinker's critical path.

When a task's result is read, the inputs the Thinker proxied for it (and does not send
back) are deleted from their store. Deleting them inline cost the agent that reads
results a round trip to the store per input, before it could submit the next task. An
:class:`Evictor` deletes them on a thread of its own instead:

* nothing leaks: :meth:`Evictor.drain` waits until every key handed over is deleted
  (the Thinker calls it when its agents stop, the queues when they close), and the thread
  is not a daemon, so the interpreter does not exit with keys pending;
* nothing fails silently: the first error is kept and raised by the next
  :meth:`Evictor.check` or :meth:`Evictor.drain` (the Thinker's next ``get_result``).

The thread starts when there is work and ends after a short idle spell, so an idle
Thinker holds no extra thread and a forked child (a task server) starts clean.
"""

from __future__ import annotations

import threading
from typing import Any

from tether.exceptions import SteerQueueError

__all__ = ['Evictor']

# Seconds the thread waits for more work before it ends.
_IDLE = 0.5


class Evictor:
    """Delete store keys on a background thread; see the module's documentation."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending: list[tuple[Any, list[Any]]] = []
        self._busy = False
        self._running = False
        self._error: BaseException | None = None

    def submit(self, store: Any, proxies: list[Any]) -> None:
        """Evict the keys behind ``proxies`` from ``store``, soon."""
        with self._cond:
            self._pending.append((store, proxies))
            if not self._running:
                self._running = True
                threading.Thread(
                    target=self._run,
                    name='tether.steer.evict',
                    daemon=False,
                ).start()
            self._cond.notify_all()

    def _run(self) -> None:
        try:
            while self._next_batch():
                pass
        except BaseException:
            with self._cond:
                # The thread dies: a later submit starts another, and drain returns.
                self._running = self._busy = False
                self._cond.notify_all()
            raise

    def _next_batch(self) -> bool:
        """Evict what is pending; return ``False`` once idle for ``_IDLE`` seconds."""
        from tether.store.utils import get_key

        with self._cond:
            if not self._pending:
                self._cond.wait(_IDLE)
            if not self._pending:
                self._running = False  # under the lock: a submit from now starts a thread
                self._cond.notify_all()
                return False
            batch, self._pending = self._pending, []
            self._busy = True
        error: BaseException | None = None
        for store, proxies in batch:
            for proxy in proxies:
                try:
                    store.evict(get_key(proxy))
                except Exception as e:  # kept for the Thinker; the others go on
                    error = error or e
        with self._cond:
            self._busy = False
            if error is not None and self._error is None:
                self._error = error
            self._cond.notify_all()
        return True

    def check(self) -> None:
        """Raise the first eviction error not reported yet, if any.

        Raises:
            SteerQueueError: an input of a finished task could not be deleted from its
                store (it may still be there).
        """
        with self._cond:
            error, self._error = self._error, None
        if error is not None:
            raise SteerQueueError(
                f'could not delete the proxied input of a finished task from its store: {error}',
            ) from error

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every key handed over is deleted; return whether it was in time.

        Raises:
            SteerQueueError: an eviction failed (see :meth:`check`).
        """
        with self._cond:
            done = self._cond.wait_for(lambda: not self._pending and not self._busy, timeout)
        self.check()
        return done
