"""Fast paths: whole small frames taken straight from the parser, before they are frames."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from tests.wire.conftest import ECHO, ThreadServer
from tether._wire import (
    Connection,
    FastFrame,
    FastPath,
    Frame,
    Later,
    Reply,
    Server,
    SyncConnection,
    encode_head,
    with_request_id,
)
from tether._wire._frame import PREFIX
from tether._wire._proto import FAST_MAX
from tether.exceptions import RemoteError
from tether.testing import wait_until

SECRET = 'fast path secret'
TAKE = 43
SLOW = 44

MakeServer = Callable[..., ThreadServer]


class Taker:
    """A fast path that answers ``TAKE`` frames itself, with a reply it encodes."""

    def __init__(self) -> None:
        self.server: Server | None = None
        self.offered: list[tuple[int, int]] = []
        self.taken = 0

    def __call__(self, conn: Connection) -> FastPath:
        def fast(frame: FastFrame) -> bool:
            mtype, header, request_id, _, raw, head = frame
            self.offered.append((mtype, raw.nbytes))
            assert self.server is not None
            if mtype != TAKE or not self.server.claim(conn):
                return False
            self.taken += 1
            payload = bytes(raw[head:])
            reply = encode_head(ECHO, {**header, 'fast': True}, [len(payload)], request_id)
            self.server.finish(conn, request_id, bytearray(reply + payload))
            return True

        return fast


def handler(conn: Connection, frame: Frame) -> Reply | Later:
    """Echo at once; ``SLOW`` echoes 50 ms later."""
    if frame.type != SLOW:
        return ECHO, frame.header, frame.payloads
    later = Later()
    reply = (ECHO, frame.header, frame.payloads)
    asyncio.get_running_loop().call_later(0.05, later.set, reply)
    return later


def _server(make_server: MakeServer) -> tuple[ThreadServer, Taker]:
    taker = Taker()
    server = make_server(secret=SECRET, handler=handler, inline=True, fast=taker)
    taker.server = server.server
    return server, taker


def _frame(mtype: int, n: int, payload: bytes = b'x') -> bytes:
    return encode_head(mtype, {'n': n}, [len(payload)], request_id=n) + payload


def test_taken_and_left_frames_keep_their_order(make_server: MakeServer) -> None:
    server, taker = _server(make_server)
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    conn.sock.sendall(_frame(TAKE, 1, b'one') + _frame(ECHO, 2, b'two') + _frame(TAKE, 3, b'3'))
    replies = [conn.recv() for _ in range(3)]
    assert [f.request_id for f in replies] == [1, 2, 3]
    assert [f.header for f in replies] == [
        {'n': 1, 'fast': True},
        {'n': 2},
        {'n': 3, 'fast': True},
    ]
    assert [bytes(f.payloads[0]) for f in replies] == [b'one', b'two', b'3']
    assert taker.taken == 2
    conn.close()


def test_large_frames_are_not_offered(make_server: MakeServer) -> None:
    server, taker = _server(make_server)
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    big = bytes(range(256)) * 400  # 102,400 bytes: over FAST_MAX
    assert len(big) > FAST_MAX
    reply = conn.request(TAKE, {'n': 1}, [big])
    assert bytes(reply.payloads[0]) == big
    assert 'fast' not in reply.header
    assert taker.offered == []
    conn.close()


def _wait_received(server: ThreadServer, nbytes: int) -> None:
    """Wait until the server's parser holds ``nbytes`` of the frame being received."""

    async def held() -> int:
        return sum(c.protocol._have for c in server.server.connections)

    wait_until(
        lambda: asyncio.run_coroutine_threadsafe(held(), server.loop).result(10) >= nbytes,
        interval=0.005,
        message=f'the server to receive {nbytes} bytes',
    )


def test_a_small_frame_split_across_reads_is_offered_whole(make_server: MakeServer) -> None:
    server, taker = _server(make_server)
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    payload = b'p' * 30_000
    frame = _frame(TAKE, 7, payload)
    conn.sock.sendall(frame[: PREFIX.size + 3])  # not even the whole head
    _wait_received(server, PREFIX.size + 3)  # each part is a read of its own
    conn.sock.sendall(frame[PREFIX.size + 3 : 20_000])
    _wait_received(server, 20_000)
    conn.sock.sendall(frame[20_000:])
    reply = conn.recv()
    assert reply.header == {'n': 7, 'fast': True}
    assert bytes(reply.payloads[0]) == payload
    assert taker.offered == [(TAKE, len(frame))]
    conn.close()


def test_a_frame_behind_a_pending_reply_is_left_to_the_handler(make_server: MakeServer) -> None:
    server, taker = _server(make_server)
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    conn.sock.sendall(_frame(SLOW, 1) + _frame(TAKE, 2) + _frame(ECHO, 3) + _frame(TAKE, 4))
    replies = [conn.recv() for _ in range(4)]
    assert [f.request_id for f in replies] == [1, 2, 3, 4]
    # Frame 2 arrived while frame 1's reply was pending: it could not be claimed, and
    # waited behind frame 1 in the usual way (so did 3 and 4, held with it).
    assert replies[1].header == {'n': 2}
    assert taker.taken == 0
    # Once nothing is pending, the fast path takes frames again.
    assert conn.request(TAKE, {'n': 5}).header == {'n': 5, 'fast': True}
    conn.close()


def test_a_fast_path_needs_an_inline_server() -> None:
    with pytest.raises(ValueError, match='inline'):
        Server(handler, fast=Taker())


def test_with_request_id_copies_the_frame_with_another_id() -> None:
    raw = _frame(ECHO, 5, b'payload')
    moved = with_request_id(memoryview(raw), 2**40 + 1)
    assert PREFIX.unpack_from(moved)[4] == 2**40 + 1
    assert PREFIX.unpack_from(raw)[4] == 5
    assert moved[8:16] != raw[8:16]
    assert moved[:8] == raw[:8]
    assert moved[16:] == raw[16:]


def test_a_failing_fast_path_is_answered_as_a_failing_handler(make_server: MakeServer) -> None:
    claim_then_fail, fail_unclaimed = 45, 46
    holder: dict[str, Server] = {}

    def hook(conn: Connection) -> FastPath:
        def fast(frame: FastFrame) -> bool:
            mtype = frame[0]
            if mtype == claim_then_fail:
                assert holder['server'].claim(conn)
                raise RuntimeError('fast boom')
            if mtype == fail_unclaimed:
                raise RuntimeError('before any claim')
            return False

        return fast

    server = make_server(secret=SECRET, handler=handler, inline=True, fast=hook)
    holder['server'] = server.server
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    with pytest.raises(RemoteError, match='fast boom') as info:
        conn.request(claim_then_fail, {'n': 1})
    assert info.value.code == 'internal'
    # Not claimed: the handler answers it (an echo).
    assert conn.request(fail_unclaimed, {'n': 2}).header == {'n': 2}
    assert conn.request(ECHO, {'n': 3}).header == {'n': 3}
    conn.close()
