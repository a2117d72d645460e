"""Run a server until it is asked to stop, SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import contextlib
import signal

__all__ = ['wait_for_stop']


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
