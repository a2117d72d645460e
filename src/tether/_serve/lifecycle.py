"""Run a server until it is asked to stop, SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import contextlib
import signal

__all__ = ['Lifecycle', 'wait_for_stop']


async def wait_for_stop(stop: asyncio.Event) -> None:
    """Wait until ``stop`` is set, setting it on SIGTERM and SIGINT meanwhile."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)


class Lifecycle:
    """What a server does to run until it is asked to stop (mixed into the endpoint and
    the relay): :meth:`serve` starts it, waits for :meth:`stop`, SIGTERM or SIGINT, and
    closes it; the server defines ``start()`` and ``close()``.
    """

    _stop: asyncio.Event | None = None

    async def start(self) -> None:
        """Start serving (listen); the server's own."""
        raise NotImplementedError

    async def close(self) -> None:
        """Stop serving and let go of everything; safe after a failed :meth:`start`."""
        raise NotImplementedError

    async def serve(self, ready: asyncio.Event | None = None) -> None:
        """Serve until :meth:`stop`, SIGTERM or SIGINT (``ready`` is set once started)."""
        self._stop = stop = asyncio.Event()
        try:
            await self.start()
        except BaseException:
            await self.close()
            raise
        if ready is not None:
            ready.set()
        try:
            await wait_for_stop(stop)
        finally:
            await self.close()

    def stop(self) -> None:
        """Ask :meth:`serve` to return, once the current callback is done (call from the
        server's event loop: a request asking to stop still gets its reply)."""
        if self._stop is not None:
            asyncio.get_running_loop().call_soon(self._stop.set)
