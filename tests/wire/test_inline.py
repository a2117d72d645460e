"""Servers with an inline handler: frames handled straight from the data callback."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from typing import Any

import pytest

from tests.wire.conftest import BOOM, ECHO, ThreadServer
from tether._wire import ERROR, Connection, Frame, Limits, Reply, SyncConnection, encode_head
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
