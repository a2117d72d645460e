"""Servers with an inline handler: frames handled straight from the data callback."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.wire.conftest import BOOM, ECHO, ThreadServer
from tether._wire import (
    ERROR,
    Connection,
    Frame,
    Later,
    Limits,
    Reply,
    Server,
    SyncConnection,
    connect,
    encode_head,
)
from tether._wire._frame import PREFIX
from tether.exceptions import FrameTooLargeError, RemoteError, WireConnectionError

SECRET = 'inline secret'
QUIET = 42

MakeServer = Callable[..., ThreadServer]


class Recorder:
    """An inline handler that records where it ran and echoes (QUIET frames: no reply)."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, Any, str]] = []

    def __call__(self, conn: Connection, frame: Frame) -> Reply | None:
        try:
            task = asyncio.current_task()
        except RuntimeError:
            task = None
        where = 'task' if task is not None else threading.current_thread().name
        self.seen.append((frame.type, frame.header.get('n'), where))
        if frame.type == BOOM:
            raise RuntimeError('boom')
        if frame.type == QUIET:
            return None
        return ECHO, frame.header, frame.payloads


def test_inline_handler_answers_without_a_task_per_frame(make_server: MakeServer) -> None:
    handler = Recorder()
    server = make_server(secret=SECRET, handler=handler, inline=True)
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    big = os.urandom(3 * 1024 * 1024)
    reply = conn.request(ECHO, {'n': 1}, [b'abc', big])
    assert reply.header == {'n': 1}
    assert [bytes(p) for p in reply.payloads] == [b'abc', big]
    # Called from the loop's data callback, not from a task serving the connection.
    assert handler.seen == [(ECHO, 1, server.thread.name)]
    conn.close()


def test_inline_handler_keeps_order_of_pipelined_frames(make_server: MakeServer) -> None:
    handler = Recorder()
    server = make_server(secret=SECRET, handler=handler, inline=True)
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    # Several frames in one write: each is handled, in order, and quiet ones get no reply.
    frames = [
        encode_head(QUIET if n % 2 else ECHO, {'n': n}, [3], request_id=n) + b'xyz'
        for n in range(1, 9)
    ]
    conn.sock.sendall(b''.join(frames))
    replies = [conn.recv() for _ in range(4)]
    assert [(f.request_id, f.header['n']) for f in replies] == [(n, n) for n in (2, 4, 6, 8)]
    assert [n for _, n, _ in handler.seen] == list(range(1, 9))
    conn.close()


def test_inline_handler_errors_become_error_replies(make_server: MakeServer) -> None:
    server = make_server(secret=SECRET, handler=Recorder(), inline=True)
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    with pytest.raises(RemoteError, match='boom') as info:
        conn.request(BOOM)
    assert info.value.code == 'internal'
    assert conn.request(ECHO, {'n': 2}).header == {'n': 2}
    conn.close()


def test_inline_server_refuses_bad_frames(make_server: MakeServer) -> None:
    server = make_server(
        secret=SECRET, handler=Recorder(), inline=True, limits=Limits(max_frame=1 << 20)
    )
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    with pytest.raises(FrameTooLargeError):
        conn.request(ECHO, {}, [b'x' * (2 << 20)])
    conn.close()
    bad = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    bad.sock.sendall(os.urandom(PREFIX.size))
    refusal = bad.recv()
    assert refusal.type == ERROR
    assert refusal.header['code'] == 'protocol'
    with pytest.raises(WireConnectionError, match='closed'):
        bad.recv()
    bad.close()
    good = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    assert good.request(ECHO, {'n': 3}).header == {'n': 3}
    good.close()


LATER = 43
SLOW = 44


class Deferring:
    """An inline handler whose ``LATER`` replies are given later, from another callback.

    ``SLOW`` frames are answered by a coroutine; everything else is echoed at once.
    """

    def __init__(self) -> None:
        self.pending: list[tuple[Later, Frame]] = []
        self.order: list[int] = []

    def __call__(self, conn: Connection, frame: Frame) -> Any:
        self.order.append(frame.header['n'])
        if frame.type == LATER:
            later = Later()
            self.pending.append((later, frame))
            return later
        if frame.type == SLOW:
            return self._slow(frame)
        return ECHO, frame.header, frame.payloads

    async def _slow(self, frame: Frame) -> Reply:
        await asyncio.sleep(0)  # answered after a round of the loop
        if frame.header.get('boom'):
            raise RuntimeError('slow boom')
        return ECHO, frame.header, frame.payloads

    def release(self, server: ThreadServer) -> None:
        """Give every pending reply (from the server's loop)."""

        def give() -> None:
            for later, frame in self.pending:
                later.set((ECHO, frame.header, frame.payloads))
            self.pending.clear()

        server.loop.call_soon_threadsafe(give)


def _pipelined(conn: SyncConnection, frames: list[tuple[int, int]]) -> None:
    conn.sock.sendall(
        b''.join(encode_head(t, {'n': n}, [1], request_id=n) + b'x' for t, n in frames)
    )


def test_later_reply_holds_back_the_connections_next_frames(make_server: MakeServer) -> None:
    handler = Deferring()
    server = make_server(secret=SECRET, handler=handler, inline=True)
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    _pipelined(conn, [(LATER, 1), (ECHO, 2), (ECHO, 3)])
    # Frames 2 and 3 wait for frame 1's reply: nothing is handled past it yet.
    deadline = time.monotonic() + 10
    while not handler.order and time.monotonic() < deadline:
        time.sleep(0.01)
    for _ in range(3):  # a few loop rounds later, still nothing past frame 1
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), server.loop).result(10)
    assert handler.order == [1]
    handler.release(server)
    replies = [conn.recv() for _ in range(3)]
    assert [f.request_id for f in replies] == [1, 2, 3]
    assert handler.order == [1, 2, 3]
    # Another connection is not held back by this one's pending reply.
    _pipelined(conn, [(LATER, 4)])
    other = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    assert other.request(ECHO, {'n': 5}).header == {'n': 5}
    handler.release(server)
    assert conn.recv().request_id == 4
    conn.close()
    other.close()


def test_coroutine_replies_keep_order_and_errors_become_error_replies(
    make_server: MakeServer,
) -> None:
    handler = Deferring()
    server = make_server(secret=SECRET, handler=handler, inline=True)
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    _pipelined(conn, [(SLOW, 1), (ECHO, 2), (SLOW, 3)])
    assert [conn.recv().request_id for _ in range(3)] == [1, 2, 3]
    with pytest.raises(RemoteError, match='slow boom') as info:
        conn.request(SLOW, {'n': 4, 'boom': True})
    assert info.value.code == 'internal'
    assert conn.request(ECHO, {'n': 5}).header == {'n': 5}
    conn.close()


def test_large_inline_reply_is_sent_whole(make_server: MakeServer) -> None:
    server = make_server(secret=SECRET, handler=Deferring(), inline=True)
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    big = os.urandom(5 * 1024 * 1024)  # over the 1 MiB of a reply written at once
    _pipelined(conn, [(ECHO, 1)])
    conn.sock.sendall(encode_head(ECHO, {'n': 2}, [len(big)], request_id=2) + big)
    _pipelined(conn, [(ECHO, 3)])
    first, second, third = conn.recv(), conn.recv(), conn.recv()
    assert (first.request_id, second.request_id, third.request_id) == (1, 2, 3)
    assert bytes(second.payloads[0]) == big
    conn.close()


def test_a_client_that_does_not_read_stops_being_read(make_server: MakeServer) -> None:
    """Replies that fill the transport hold the next frames back; reading stops."""
    handler = Deferring()
    server = make_server(secret=SECRET, handler=handler, inline=True)
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    chunk = os.urandom(512 * 1024)
    count = 64  # 32 MiB of replies: far more than the socket buffers hold

    def send_all() -> None:
        for n in range(1, count + 1):
            conn.sock.sendall(encode_head(ECHO, {'n': n}, [len(chunk)], request_id=n) + chunk)

    sender = threading.Thread(target=send_all, daemon=True)
    sender.start()

    def held() -> tuple[bool, int]:
        (c,) = server.server.connections
        return c._busy, len(c._held)

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        busy, waiting = asyncio.run_coroutine_threadsafe(_call(held), server.loop).result(10)
        if busy and len(handler.order) < count:
            break
        time.sleep(0.05)
    else:
        pytest.fail('the server never held frames back')
    assert waiting <= 8  # reading stopped after a few held frames
    # Reading the replies lets everything through, in order.
    got = [conn.recv() for _ in range(count)]
    sender.join(30)
    assert [f.request_id for f in got] == list(range(1, count + 1))
    assert all(bytes(f.payloads[0]) == chunk for f in got)
    conn.close()


async def _call(fn: Callable[[], Any]) -> Any:
    return fn()


def test_on_next_hands_over_the_next_frame_or_the_error() -> None:
    async def main() -> None:
        got: list[Any] = []
        server = Server(lambda conn, frame: (ECHO, frame.header, ()), secret=SECRET, inline=True)
        await server.start()
        conn = await connect('127.0.0.1', server.address[1], secret=SECRET)
        rid = conn.write_request(ECHO, {'n': 1})
        assert conn.write_request(ECHO, {'n': 2}) == rid + 1
        done = asyncio.Event()

        def on_frame(item: Any) -> None:
            got.append(item)
            done.set()

        conn.protocol.on_next(on_frame)
        with pytest.raises(RuntimeError, match='reader'):
            conn.protocol.on_next(on_frame)
        await done.wait()
        assert got[0].request_id == rid
        # The second reply was queued for recv, not given to the one-shot callback.
        assert (await conn.recv()).request_id == rid + 1
        done.clear()
        conn.protocol.on_next(on_frame)
        await server.close()
        await done.wait()
        assert isinstance(got[1], WireConnectionError)
        # On a connection that has failed, the error is handed over at once.
        late: list[Any] = []
        conn.protocol.on_next(late.append)
        assert isinstance(late[0], WireConnectionError)

    asyncio.run(main())
