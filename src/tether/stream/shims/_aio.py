"""A private asyncio event loop in a daemon thread, for the async broker clients.

NATS (nats-py) and AMQP (aio-pika) clients are asyncio only; the shims keep the
synchronous Publisher/Subscriber API by running them on a loop of their own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from tether.exceptions import StreamTimeoutError

__all__ = ['LoopThread']

T = TypeVar('T')


class LoopThread:
    """An event loop running in a daemon thread; :meth:`run` waits for a coroutine."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None) -> T:
        """Run ``coro`` on the loop and return its result.

        Raises:
            StreamTimeoutError: if it did not finish within ``timeout`` (it is cancelled).
        """
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        done, _ = concurrent.futures.wait([future], timeout)
        if not done:
            future.cancel()
            raise StreamTimeoutError(f'broker operation did not finish in {timeout} s')
        return future.result()

    def stop(self) -> None:
        """Stop the loop and join its thread."""
        if self.loop.is_closed():
            return

        async def _cancel_tasks() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.loop.shutdown_asyncgens()

        if self._thread.is_alive():
            with contextlib.suppress(StreamTimeoutError):  # a task refused to stop
                self.run(_cancel_tasks(), 5.0)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self.loop.close()
