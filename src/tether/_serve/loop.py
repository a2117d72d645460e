"""Event loops: a new one (uvloop's when installed), and one running in a thread of its own.

Every server and async client of tether gets its loop here. uvloop, when it is installed,
does each socket read and write with less Python per call (an agent message or a task
hop takes about a third less time); ``TETHER_UVLOOP=0`` (or the older
``TETHER_FAAS_UVLOOP=0``) keeps asyncio's own loop, to compare or to debug with
asyncio's tools.

:class:`LoopThread` runs a loop in a daemon thread, for synchronous code that drives
asyncio clients or servers (the NATS and AMQP stream shims, the agents' direct
exchange, the function service run in a thread, the SDK's result stream).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ['LoopThread', 'new_event_loop', 'run']

T = TypeVar('T')

_OFF = ('0', 'false', 'no', 'off')


def _uvloop() -> Any:
    for name in ('TETHER_UVLOOP', 'TETHER_FAAS_UVLOOP'):
        if os.environ.get(name, '1').strip().lower() in _OFF:
            return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop


def new_event_loop(*, fast: bool = True) -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's when it is installed (and ``fast``), else asyncio's."""
    uvloop = _uvloop() if fast else None
    loop: asyncio.AbstractEventLoop = (
        uvloop.new_event_loop() if uvloop is not None else asyncio.new_event_loop()
    )
    return loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` on a new event loop (as :func:`asyncio.run` does, uvloop's when installed)."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)


class LoopThread:
    """An event loop running in a daemon thread; :meth:`run` waits for a coroutine on it.

    Args:
        name: The thread's name.
        fast: uvloop's loop when installed (see :func:`new_event_loop`); asyncio's if not.
        timeout_error: The exception :meth:`run` raises when a coroutine did not finish
            in time; :class:`TimeoutError` by default.
    """

    def __init__(
        self,
        name: str,
        *,
        fast: bool = False,
        timeout_error: type[Exception] = TimeoutError,
    ) -> None:
        self.loop = new_event_loop(fast=fast)
        self._timeout_error = timeout_error
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    @property
    def thread(self) -> threading.Thread:
        """The thread that runs the loop."""
        return self._thread

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None) -> T:
        """Run ``coro`` on the loop and return its result.

        Raises:
            timeout_error: it did not finish within ``timeout`` seconds (it is cancelled).
        """
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        done, _ = concurrent.futures.wait([future], timeout)
        if not done:
            future.cancel()
            raise self._timeout_error(f'operation did not finish in {timeout} s')
        return future.result()

    def stop(self, timeout: float = 5.0) -> None:
        """Cancel the loop's tasks, stop it and join its thread (each within ``timeout``)."""
        if self.loop.is_closed():
            return

        async def _cancel_tasks() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.loop.shutdown_asyncgens()

        if self._thread.is_alive():
            with contextlib.suppress(self._timeout_error):  # a task refused to stop
                self.run(_cancel_tasks(), timeout)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()
