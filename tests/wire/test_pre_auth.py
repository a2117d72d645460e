"""Servers whose peers authenticate in the handler; memory budgets for size claims.

``Server(handler_auth=True)``: until the handler calls ``authenticate``, a connection's
frames are held to the small pre-authentication limits and it must authenticate within
the handshake timeout. ``MemoryBudget``: each frame's claimed payload bytes are reserved
against a budget shared by all connections before anything is allocated.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import pytest

from tests.wire.conftest import ThreadServer
from tether._wire import (
    ERROR,
    PRE_AUTH_LIMITS,
    Connection,
    Frame,
    Limits,
    MemoryBudget,
    Reply,
    Server,
    SyncConnection,
    encode_head,
)
from tether.exceptions import FrameTooLargeError

LOGIN = 60
DATA = 61
OK = 62


def login_server(make_server: Callable[..., ThreadServer], **kwargs: object) -> ThreadServer:
    holder: list[Server] = []

    async def handler(conn: Connection, frame: Frame) -> Reply | None:
        if frame.type == LOGIN:
            if frame.header.get('token') != 'sesame':
                return 5, {'code': 'auth', 'message': 'wrong token'}, ()
            holder[0].authenticate(conn)
            return OK, {}, ()
        if not conn.authenticated:
            return 5, {'code': 'auth', 'message': 'log in first'}, ()
        return OK, {'n': sum(len(p) for p in frame.payloads)}, frame.payloads[:0]

    server = make_server(handler=handler, handler_auth=True, **kwargs)
    holder.append(server.server)
    return server


def closed_by_server(sock: socket.socket, deadline: float = 30.0) -> bool:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        sock.settimeout(max(0.01, end - time.monotonic()))
        try:
            if not sock.recv(65536):
                return True
        except TimeoutError:
            continue
        except ConnectionResetError:
            return True
    return False


def test_frames_before_login_are_small(make_server: Callable[..., ThreadServer]) -> None:
    server = login_server(make_server)
    conn = SyncConnection('127.0.0.1', server.port)
    big = bytes(PRE_AUTH_LIMITS.max_frame + 1)
    with pytest.raises(FrameTooLargeError, match='exceeds the limit of 16384'):
        conn.request(DATA, {}, [big])
    conn.close()
    conn = SyncConnection('127.0.0.1', server.port)
    assert conn.request(LOGIN, {'token': 'sesame'}).type == OK
    assert conn.request(DATA, {}, [big]).header == {'n': len(big)}
    conn.close()


def test_a_connection_that_never_logs_in_is_dropped(
    make_server: Callable[..., ThreadServer],
) -> None:
    server = login_server(make_server, limits=Limits(handshake_timeout=0.3))
    stays = SyncConnection('127.0.0.1', server.port)
    assert stays.request(LOGIN, {'token': 'sesame'}).type == OK
    idle = [SyncConnection('127.0.0.1', server.port) for _ in range(5)]
    wrong = SyncConnection('127.0.0.1', server.port)
    with pytest.raises(Exception, match='wrong token'):
        wrong.request(LOGIN, {'token': 'guess'})
    for conn in [*idle, wrong]:
        assert closed_by_server(conn.sock)
        conn.close()
    assert server.server.login_timeouts == 6
    assert stays.request(DATA, {}, [b'abc']).header == {'n': 3}
    stays.close()


def test_a_server_without_handler_auth_is_unchanged(
    make_server: Callable[..., ThreadServer],
) -> None:
    server = make_server(secret='s3cret', limits=Limits(handshake_timeout=0.3))
    conn = SyncConnection('127.0.0.1', server.port, secret='s3cret')
    big = bytes(1 << 20)
    assert len(conn.request(DATA, {}, [big]).payloads[0]) == len(big)
    assert not closed_by_server(conn.sock, deadline=0.6)  # no login deadline
    conn.close()


def test_memory_budget_reserves_claims_before_allocating(
    make_server: Callable[..., ThreadServer],
) -> None:
    budget = MemoryBudget(1 << 20, name='test server')
    server = make_server(memory=budget)
    holders = [SyncConnection('127.0.0.1', server.port) for _ in range(3)]
    for conn in holders[:2]:
        conn.sock.sendall(encode_head(DATA, {}, [400_000], 1))
    end = time.monotonic() + 30
    while budget.reserved != 800_000 and time.monotonic() < end:
        time.sleep(0.01)
    assert budget.reserved == 800_000
    holders[2].sock.sendall(encode_head(DATA, {}, [400_000], 1))
    error = holders[2].recv()
    assert error.type == ERROR
    assert error.header['code'] == 'too-large'
    assert 'does not fit its memory budget' in error.header['message']
    assert budget.refused == 1
    assert budget.peak == 800_000
    for conn in holders:
        conn.close()
    end = time.monotonic() + 30
    while budget.reserved and time.monotonic() < end:
        time.sleep(0.01)
    assert budget.reserved == 0
    conn = SyncConnection('127.0.0.1', server.port)
    assert len(conn.request(DATA, {}, [bytes(900_000)]).payloads[0]) == 900_000
    conn.close()
    assert budget.reserved == 0


def test_memory_budget_arguments() -> None:
    with pytest.raises(ValueError, match='negative'):
        MemoryBudget(-1)
    budget = MemoryBudget(10)
    budget.reserve(10)
    with pytest.raises(FrameTooLargeError):
        budget.reserve(1)
    budget.unreserve(10)
    assert budget.allocate([4, 6]) == [bytearray(4), bytearray(6)]
    assert budget.reserved == 10
    budget.release([bytearray(4), memoryview(bytearray(6)), object()])
    assert budget.reserved == 0
