"""Every reply is matched to its request: a mismatch raises, it never returns data."""

from __future__ import annotations

import os
import select
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.wire.conftest import ThreadServer
from tether._serve import codes as proto
from tether._wire import Connection, Frame, Reply, SyncClient, SyncConnection
from tether.connectors.node import NodeConnector, NodeKey
from tether.exceptions import ConnectorError, ProtocolError, WireConnectionError

SECRET = 'reply-matching-secret'


@pytest.fixture
def liar() -> Iterator[ThreadServer]:
    """A server (with the right secret) that answers every GET about another object."""

    async def handler(conn: Connection, frame: Frame) -> Reply | None:
        if frame.type == proto.GET:
            return proto.OK, {'ids': ['someone-else'], 'found': [True]}, [b'not yours']
        return proto.OK, {}, ()

    server = ThreadServer(handler=handler, secret=SECRET)
    yield server
    server.close()


@pytest.fixture
def wrong_request_id() -> Iterator[ThreadServer]:
    """A server whose replies carry another request's id."""
    server: ThreadServer

    async def handler(conn: Connection, frame: Frame) -> Reply | None:
        await conn.send(proto.OK, {'ids': frame.header.get('ids')}, [b'x'], request_id=7)
        return None

    server = ThreadServer(handler=handler, secret=SECRET)
    yield server
    server.close()


def test_reply_about_another_object_raises(liar: ThreadServer) -> None:
    connector = NodeConnector(f'liar-{uuid.uuid4().hex[:8]}', secret=SECRET)
    key = NodeKey('a' * 32, '127.0.0.1', liar.port)
    with pytest.raises(ConnectorError, match='out of step') as info:
        connector.get(key)
    assert isinstance(info.value.__cause__, ProtocolError)
    with pytest.raises(ConnectorError, match='out of step'):
        connector.get_batch([key])
    connector.close()


def test_reply_to_another_request_raises(wrong_request_id: ThreadServer) -> None:
    conn = SyncConnection('127.0.0.1', wrong_request_id.port, secret=SECRET)
    with pytest.raises(ProtocolError, match='answered request 7'):
        conn.request(proto.GET, {'ids': ['a' * 32]})
    conn.close()


def _echo_ids(frame: Frame) -> Reply:
    return proto.OK, {'ids': frame.header.get('ids'), 'pid': frame.header.get('pid')}, ()


@pytest.fixture
def echo() -> Iterator[ThreadServer]:
    async def handler(conn: Connection, frame: Frame) -> Reply | None:
        return _echo_ids(frame)

    server = ThreadServer(handler=handler, secret=SECRET)
    yield server
    server.close()


@pytest.mark.filterwarnings('ignore:This process .* is multi-threaded:DeprecationWarning')
def test_forked_child_never_uses_the_parents_connection(echo: ThreadServer) -> None:
    client = SyncClient('127.0.0.1', echo.port, secret=SECRET)
    client.request(proto.STATUS, {'pid': os.getpid()})
    parent_conn = client._idle[0]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            # The inherited connection is refused outright ...
            try:
                parent_conn.request(proto.STATUS)
            except WireConnectionError:
                code = 0
            # ... and the pool opens the child's own.
            frame = client.request(proto.STATUS, {'pid': os.getpid()})
            if frame.header['pid'] != os.getpid() or parent_conn in client._idle:
                code = 2
        finally:
            os.write(write, bytes([code]))
            os._exit(0)
    os.close(write)
    result = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    assert result == b'\x00'
    # The parent's connection is still in step.
    assert client.request(proto.STATUS, {'pid': os.getpid()}).header['pid'] == os.getpid()
    assert client._idle == [parent_conn]
    client.close()


def test_request_ids_differ_between_connections(echo: ThreadServer) -> None:
    first = SyncConnection('127.0.0.1', echo.port, secret=SECRET)
    second = SyncConnection('127.0.0.1', echo.port, secret=SECRET)
    ids: list[Any] = [first._next_id, second._next_id]
    assert ids[0] != ids[1]
    first.close()
    second.close()


def test_redis_connection_with_an_unread_reply_is_never_reused() -> None:
    from tether.connectors.redis import RedisConnector

    prefix = f'test-replies-{uuid.uuid4().hex}:'
    connector = RedisConnector(prefix=prefix, max_connections=1)
    try:
        first = connector.put(b'first')
        second = connector.put(b'second')
        # A connection goes back to the pool with a reply nobody read (an interrupted
        # caller): the next request must not take that reply for its own.
        from tether.connectors._redis_conn import send_all

        pool = connector._router.pool_for(second.redis_key)
        conn = pool.get()
        name = first.redis_key.encode()
        send_all(conn.sock, [b'*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n' % (len(name), name)], None)
        # Once the stale reply has arrived, the pool never lends the connection (bytes
        # waiting: RawPool.get closes it and connects anew); the connector itself
        # releases a connection only after reading every reply it asked for (a GET is
        # one command: a reply still in flight would not be told apart from its own).
        assert select.select([conn.sock], [], [], 10)[0]
        pool.release(conn)
        got = connector.get(second)
        assert got is not None
        assert bytes(got) == b'second'  # not the stale reply to GET first
        assert conn.sock.fileno() == -1  # the out-of-step connection was closed
        # The pool's connections are in step.
        assert bytes(connector.get(second)) == b'second'  # type: ignore[arg-type]
        assert bytes(connector.get(first)) == b'first'  # type: ignore[arg-type]
        assert connector.get_batch([second, first]) == [b'second', b'first']
    finally:
        connector.close(clear=True)
