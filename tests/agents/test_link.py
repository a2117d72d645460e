"""The pipelined direct link of the hybrid exchange: nothing unacknowledged is lost."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tether._wire import Server, error_reply
from tether.agents.exchange._link import open_link
from tether.agents.message import ACK, AGENT_MESSAGE

SECRET = 'link-test-secret'


@pytest.fixture
def server() -> Iterator[tuple[Server, list[int]]]:
    received: list[int] = []

    async def handler(conn: Any, frame: Any) -> Any:
        n = frame.header['n']
        received.append(n)
        if n == 1:
            return error_reply('not-here', 'mailbox 1 is not served here')
        if n == 3:
            conn.transport.abort()  # dies before acknowledging 3
            return None
        return (ACK, None, ())

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    srv = Server(handler, host='127.0.0.1', port=0, secret=SECRET, name='link test')
    asyncio.run_coroutine_threadsafe(srv.start(), loop).result(30)
    yield srv, received
    asyncio.run_coroutine_threadsafe(srv.close(), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)
    loop.close()


def test_refused_and_unacknowledged_messages_are_rerouted(
    server: tuple[Server, list[int]],
) -> None:
    srv, received = server
    rerouted: list[tuple[str, int, str]] = []
    broken = threading.Event()

    def reroute(
        dest: str, header: dict[str, Any], payloads: list[Any], why: str, extra: Any
    ) -> None:
        rerouted.append((dest, header['n'], why))

    host, port = srv.address
    link = open_link(
        host, port, AGENT_MESSAGE, reroute, lambda _: broken.set(), secret=SECRET, timeout=10
    )
    for n in range(3):
        assert link.send(f'box-{n}', {'n': n}, [b'x' * n])
    # 0 and 2 acknowledged and 1 refused before the server dies at 3 (its reset could
    # otherwise overtake acknowledgements the link had not read yet).
    deadline = time.monotonic() + 30
    while link.in_flight and time.monotonic() < deadline:
        time.sleep(0.01)
    assert link.in_flight == 0
    for n in range(3, 6):
        if not link.send(f'box-{n}', {'n': n}, [b'x' * n]):
            # The link broke (after 3) before this send: the caller reroutes it itself.
            rerouted.append((f'box-{n}', n, 'sent after the link broke'))
    assert broken.wait(30)
    deadline = time.monotonic() + 30
    while len(rerouted) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    numbers = sorted(n for _, n, _ in rerouted)
    # 0 and 2 were acknowledged; 1 was refused; 3 and later were never acknowledged.
    assert numbers == [1, 3, 4, 5]
    assert ('box-1', 1, 'mailbox 1 is not served here') in rerouted
    assert received[:4] == [0, 1, 2, 3]
    assert not link.send('box-9', {'n': 9}, [])  # broken: the caller reroutes itself
    link.close()


def test_a_wrong_secret_is_refused(server: tuple[Server, list[int]]) -> None:
    from tether.exceptions import AuthenticationError

    srv, received = server
    host, port = srv.address
    with pytest.raises(AuthenticationError):
        open_link(host, port, AGENT_MESSAGE, lambda *a: None, lambda _: None, secret='wrong')
    assert received == []


def test_concurrent_senders_share_writes_and_keep_their_order() -> None:
    got: list[tuple[int, int]] = []

    async def handler(conn: Any, frame: Any) -> Any:
        got.append((frame.header['t'], frame.header['n']))
        assert bytes(frame.payloads[0]) == b'p' * frame.header['n']
        return (ACK, None, ())

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    srv = Server(handler, host='127.0.0.1', port=0, secret=SECRET, name='order test')
    asyncio.run_coroutine_threadsafe(srv.start(), loop).result(30)
    try:
        host, port = srv.address
        link = open_link(host, port, AGENT_MESSAGE, lambda *a: None, lambda _: None, secret=SECRET)

        def sender(t: int) -> None:
            for n in range(200):
                assert link.send('box', {'t': t, 'n': n}, [b'p' * n])

        senders = [threading.Thread(target=sender, args=(t,)) for t in range(8)]
        for s in senders:
            s.start()
        for s in senders:
            s.join(60)
        link.close()  # waits for the acknowledgements
        assert len(got) == 8 * 200
        for t in range(8):
            assert [n for tt, n in got if tt == t] == list(range(200))
        assert not link._inflight
    finally:
        asyncio.run_coroutine_threadsafe(srv.close(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()
