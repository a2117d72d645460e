"""Splices: two authenticated connections that carry each other's bytes unparsed."""

from __future__ import annotations

import asyncio
import os

import pytest

from tests.wire.conftest import ECHO, echo_handler
from tether._wire import Connection, Frame, Reply, Server, Splice, connect, encode_head
from tether.exceptions import WireConnectionError

SECRET = 'splice secret'
SPLICE = 45


def test_a_spliced_connection_talks_to_the_far_server() -> None:
    async def scenario() -> None:
        far = Server(echo_handler, host='127.0.0.1', port=0, secret=SECRET, name='far')
        await far.start()
        closed: list[Splice] = []

        async def front_handler(conn: Connection, frame: Frame) -> Reply | None:
            if frame.type != SPLICE:
                return ECHO, {'front': True}, ()
            back = await connect('127.0.0.1', far.address[1], secret=SECRET)
            conn.transport.write(encode_head(ECHO, {'spliced': True}, (), frame.request_id))
            Splice(conn, back, closed.append).start()
            return None

        front = Server(front_handler, host='127.0.0.1', port=0, secret=SECRET, name='front')
        await front.start()
        client = await connect('127.0.0.1', front.address[1], secret=SECRET)
        assert (await client.request(ECHO, {})).header == {'front': True}
        assert (await client.request(SPLICE, {})).header == {'spliced': True}
        # From now on the far server answers, large payloads included (flow control).
        big = os.urandom(8 << 20)
        reply = await client.request(ECHO, {'to': 'far'}, [big])
        assert reply.header == {'to': 'far'}
        assert bytes(reply.payloads[0]) == big
        assert len(front.connections) == 1
        # The far side closing closes both; the front server ends the connection it served.
        await far.close()
        with pytest.raises(WireConnectionError):
            await client.request(ECHO, {})
        while front.connections:
            await asyncio.sleep(0.01)
        assert len(closed) == 1
        await front.close()

    asyncio.run(scenario())


def test_only_a_quiet_connection_is_spliced() -> None:
    """A connection with a reader waiting (or bytes received) would lose them: refused."""

    async def scenario() -> None:
        server = Server(echo_handler, host='127.0.0.1', port=0, secret=SECRET)
        await server.start()
        a = await connect('127.0.0.1', server.address[1], secret=SECRET)
        b = await connect('127.0.0.1', server.address[1], secret=SECRET)
        assert Splice.quiet(a)
        assert Splice.quiet(b)
        a.protocol.on_next(lambda frame: None)
        assert not Splice.quiet(a)
        with pytest.raises(ValueError, match='cannot be spliced'):
            Splice(a, b, lambda s: None).start()
        for conn in (a, b):
            conn.abort()
        await server.close()

    asyncio.run(scenario())
