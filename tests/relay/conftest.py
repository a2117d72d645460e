"""A relay served in-process on its own event loop (a thread), and raw clients of it."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from tether._serve import signalling as rp
from tether._wire import SyncConnection
from tether.relay import RelayConfig, RelayServer, hash_token

T = TypeVar('T')

TOKENS = {'alice': 'alice-relay-token-0123456789', 'bob': 'bob-relay-token-9876543210'}


def relay_config(**settings: Any) -> RelayConfig:
    """An insecure loopback relay on free ports, users alice and bob."""
    return RelayConfig.model_validate(
        {
            'host': '127.0.0.1',
            'port': 0,
            'data_port': 0,
            'udp_port': 0,
            'insecure': True,
            'users': [{'name': n, 'token_sha256': hash_token(t)} for n, t in TOKENS.items()],
            **settings,
        },
    )


class ThreadRelay:
    """A :class:`RelayServer` on its own event loop in a daemon thread."""

    def __init__(self, config: RelayConfig) -> None:
        self.config = config
        self.loop = asyncio.new_event_loop()
        self.relay = RelayServer(config)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.relay.start(), self.loop).result(10)
        self.port = self.relay.address[1]
        self.data_port = self.call(lambda: self.relay.data_port)

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the relay's loop and return its result."""

        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    def status(self) -> dict[str, Any]:
        return self.call(self.relay.status)

    def connect(self) -> SyncConnection:
        """A wire connection that completed the handshake and has not registered."""
        return SyncConnection('127.0.0.1', self.port, timeout=10)

    def register(self, user: str, uuid: str, name: str | None = None) -> SyncConnection:
        conn = self.connect()
        conn.request(
            rp.REGISTER,
            {'token': TOKENS.get(user, user), 'uuid': uuid, 'name': name or uuid},
        )
        return conn

    def close(self) -> None:
        if self.loop.is_closed():
            return
        asyncio.run_coroutine_threadsafe(self.relay.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def make_relay() -> Iterator[Callable[..., ThreadRelay]]:
    relays: list[ThreadRelay] = []

    def make(**settings: Any) -> ThreadRelay:
        relay = ThreadRelay(relay_config(**settings))
        relays.append(relay)
        return relay

    yield make
    for relay in relays:
        relay.close()


def wait_closed(sock: socket.socket, deadline: float = 30.0) -> bytes:
    """Read ``sock`` until the other side closes it; return what was read.

    Raises:
        AssertionError: the connection was still open after ``deadline`` seconds.
    """
    got = bytearray()
    end = time.monotonic() + deadline
    while True:
        left = end - time.monotonic()
        if left <= 0:
            raise AssertionError(f'the relay kept the connection open for {deadline} s')
        sock.settimeout(left)
        try:
            data = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return bytes(got)
        if not data:
            return bytes(got)
        got += data
