"""Hybrid exchange specifics: addresses, direct sends, fallback, authentication."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.agents._behaviors import Echo
from tether._wire import SyncClient
from tether.agents import Manager
from tether.agents._message import AGENT_MESSAGE, PING, Message, encode
from tether.agents.launcher import ThreadLauncher
from tether.exceptions import AuthenticationError


def test_an_address_is_published_only_once_it_serves(
    make_exchange: Any, redis_client: Any
) -> None:
    exchange = make_exchange('hybrid')
    agent_id = exchange.register_agent(Echo)
    key = f'{exchange.prefix}addr:{agent_id}'
    seen: list[bytes] = []

    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            raw = redis_client.get(key)
            if raw is not None:
                seen.append(raw)
                return

    watcher = threading.Thread(target=watch)
    watcher.start()
    with Manager(exchange, ThreadLauncher()) as manager:
        manager.launch(Echo(), agent_id=agent_id)
        watcher.join(60)
        assert seen, 'the address was never published'
        # The very first moment the address is visible, a direct message is accepted.
        host, _, port = seen[0].decode().rpartition(':')
        transport = exchange.transport()
        header, payloads = encode(Message(PING, 'client-test', agent_id, 1), transport.codec)
        client = SyncClient(host, int(port), secret=transport.secret)
        try:
            reply = client.request(AGENT_MESSAGE, header, payloads, retry=False)
            assert reply.type == AGENT_MESSAGE + 1  # ACK, not 'not-here'
        finally:
            client.close()
    # Stopped: the address is gone before the mailbox stops being served.
    assert redis_client.get(key) is None


def test_direct_sends_fall_back_to_redis(make_exchange: Any) -> None:
    exchange = make_exchange('hybrid')
    with Manager(exchange, ThreadLauncher()) as manager:
        handle = manager.launch(Echo())
        handle.ping(timeout=30)
        transport = exchange.transport()
        # A stale address (nobody listens there): the message goes through Redis.
        transport._addresses[handle.agent_id] = ('127.0.0.1', 1)
        served = transport._served.pop(handle.agent_id)
        try:
            before = transport.fallback_sends
            future = handle.echo('via redis')
            assert transport.fallback_sends == before + 1
        finally:
            transport._served[handle.agent_id] = served
        assert future.result(30) == 'via redis'


def test_a_wrong_secret_is_refused(make_exchange: Any) -> None:
    exchange = make_exchange('hybrid', secret='right')
    with Manager(exchange, ThreadLauncher()) as manager:
        handle = manager.launch(Echo())
        handle.ping(timeout=30)
        transport = exchange.transport()
        host, port = transport._server.address
        client = SyncClient(host, port, secret='wrong')
        with pytest.raises(AuthenticationError):
            client.request(AGENT_MESSAGE, {}, [])
        client.close()
