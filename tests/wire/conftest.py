"""An asyncio wire server running in a background thread, for the wire tests."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tether._wire import Connection, Frame, Reply, Server

ECHO = 40
BOOM = 41


async def echo_handler(conn: Connection, frame: Frame) -> Reply | None:
    """Echo the header and payloads back; ``BOOM`` raises inside the handler."""
    if frame.type == BOOM:
        raise RuntimeError('boom')
    return ECHO, frame.header, frame.payloads


class ThreadServer:
    """Run a :class:`Server` on its own event loop in a daemon thread."""

    def __init__(self, **kwargs: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.server = Server(kwargs.pop('handler', echo_handler), **kwargs)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(10)

    @property
    def port(self) -> int:
        return self.server.address[1]

    @property
    def refused(self) -> int:
        return self.server.refused

    def close(self) -> None:
        if self.loop.is_closed():  # closed by the test already
            return
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def make_server() -> Iterator[Callable[..., ThreadServer]]:
    servers: list[ThreadServer] = []

    def make(**kwargs: Any) -> ThreadServer:
        server = ThreadServer(**kwargs)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()
