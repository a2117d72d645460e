"""The wire protocol: framing, handshake, authentication, limits, TLS, refusals."""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import struct
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.wire.conftest import BOOM, ECHO, ThreadServer
from tether._wire import (
    ERROR,
    FIRST_APP_TYPE,
    PROTOCOL_VERSION,
    Limits,
    SyncClient,
    SyncConnection,
    connect,
    encode_head,
)
from tether._wire._frame import MAGIC, PREFIX
from tether.exceptions import (
    AuthenticationError,
    FrameTooLargeError,
    ProtocolVersionError,
    RemoteError,
    WireConnectionError,
)
from tether.testing import hammer

SECRET = 'correct horse battery staple'

MakeServer = Callable[..., ThreadServer]


def assert_serving(server: ThreadServer, secret: str | None = SECRET) -> None:
    """A well-behaved client is still served."""
    conn = SyncConnection('127.0.0.1', server.port, secret=secret, timeout=10)
    try:
        reply = conn.request(ECHO, {'ok': 1}, [b'still here'])
    finally:
        conn.close()
    assert reply.header == {'ok': 1}
    assert bytes(reply.payloads[0]) == b'still here'


def test_roundtrip_header_and_payloads(make_server: MakeServer) -> None:
    server = make_server(secret=SECRET)
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    big = os.urandom(3 * 1024 * 1024)
    reply = conn.request(
        ECHO,
        {'text': 'héllo', 'n': [1, 2]},
        [b'', b'abc', big, [b'multi', memoryview(b'-part')]],
    )
    conn.close()
    assert reply.type == ECHO
    assert reply.header == {'text': 'héllo', 'n': [1, 2]}
    assert [bytes(p) for p in reply.payloads] == [b'', b'abc', big, b'multi-part']


def test_handler_errors_become_error_replies(make_server: MakeServer) -> None:
    server = make_server(secret=SECRET)
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    with pytest.raises(RemoteError, match='boom') as info:
        conn.request(BOOM)
    assert info.value.code == 'internal'
    # The connection survives a handler error.
    assert conn.request(ECHO, {'a': 1}).header == {'a': 1}
    conn.close()


def test_pool_reuses_connections_across_threads(make_server: MakeServer) -> None:
    server = make_server(secret=SECRET)
    client = SyncClient('127.0.0.1', server.port, secret=SECRET)

    def work(i: int, j: int) -> None:
        reply = client.request(ECHO, {'i': i, 'j': j}, [bytes([i]) * j])
        assert reply.header == {'i': i, 'j': j}
        assert bytes(reply.payloads[0]) == bytes([i]) * j

    hammer(work, threads=4, calls=50)
    assert len(server.server.connections) <= 4
    client.close()


def test_async_client(make_server: MakeServer) -> None:
    server = make_server(secret=SECRET)

    async def main() -> bytes:
        conn = await connect('127.0.0.1', server.port, secret=SECRET)
        try:
            reply = await conn.request(ECHO, {'x': 1}, [b'async'])
        finally:
            await conn.close()
        return bytes(reply.payloads[0])

    assert asyncio.run(main()) == b'async'


def test_wrong_secret_is_refused_and_server_keeps_serving(make_server: MakeServer) -> None:
    server = make_server(secret=SECRET)
    with pytest.raises(AuthenticationError):
        SyncConnection('127.0.0.1', server.port, secret='wrong')
    with pytest.raises(AuthenticationError, match='requires a shared secret'):
        SyncConnection('127.0.0.1', server.port, secret=None)
    assert server.refused >= 1
    assert_serving(server)


def test_client_refuses_a_server_with_another_secret(make_server: MakeServer) -> None:
    # Mutual authentication: the server must prove it knows the secret too.
    server = make_server(secret='the server secret')
    with pytest.raises(AuthenticationError, match='could not prove'):
        SyncConnection('127.0.0.1', server.port, secret=SECRET)


def test_secret_never_crosses_the_wire(make_server: MakeServer) -> None:
    server = make_server(secret=SECRET)
    seen = bytearray()
    relay = socket.create_server(('127.0.0.1', 0))

    def pump(src: socket.socket, dst: socket.socket) -> None:
        while data := src.recv(65536):
            seen.extend(data)
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)

    def accept() -> None:
        inner, _ = relay.accept()
        outer = socket.create_connection(('127.0.0.1', server.port))
        t = threading.Thread(target=pump, args=(outer, inner), daemon=True)
        t.start()
        pump(inner, outer)
        t.join(10)
        inner.close()
        outer.close()

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    conn = SyncConnection('127.0.0.1', relay.getsockname()[1], secret=SECRET)
    conn.request(ECHO, {}, [b'x'])
    conn.close()
    t.join(10)
    relay.close()
    assert len(seen) > 100
    assert SECRET.encode() not in seen
    assert SECRET.encode().hex().encode() not in seen


def test_other_protocol_version_is_refused(make_server: MakeServer) -> None:
    server = make_server(secret=SECRET)
    with pytest.raises(ProtocolVersionError, match=f'version {PROTOCOL_VERSION}'):
        SyncConnection('127.0.0.1', server.port, secret=SECRET, version=PROTOCOL_VERSION + 1)
    assert_serving(server)


def test_oversized_frame_is_refused(make_server: MakeServer) -> None:
    server = make_server(secret=SECRET, limits=Limits(max_frame=1 << 20, max_header=1024))
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    # Claim a petabyte payload: refused from the prefix alone, nothing allocated.
    conn.sock.sendall(encode_head(ECHO, None, [1 << 50], request_id=1))
    with pytest.raises(FrameTooLargeError):
        conn.request(ECHO)
    conn.close()
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    with pytest.raises(FrameTooLargeError, match='header'):
        conn.request(ECHO, {'pad': 'x' * 2000})
    conn.close()
    assert_serving(server)


def test_client_enforces_its_own_limits(make_server: MakeServer) -> None:
    server = make_server(secret=SECRET)
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET, limits=Limits(max_frame=10))
    with pytest.raises(FrameTooLargeError):
        conn.request(ECHO, {}, [b'more than ten bytes'])
    conn.close()


@pytest.mark.parametrize('garbage', ['random', 'magic-then-random', 'half-prefix'])
def test_random_bytes_are_refused(make_server: MakeServer, garbage: str) -> None:
    server = make_server(secret=SECRET, limits=Limits(handshake_timeout=1.0))
    before = server.refused
    data = {
        'random': os.urandom(4096),
        'magic-then-random': MAGIC + os.urandom(4096),
        'half-prefix': MAGIC + b'\x01',
    }[garbage]
    with socket.create_connection(('127.0.0.1', server.port), timeout=10) as sock:
        sock.sendall(data)
        # The server closes the connection (after at most the handshake timeout).
        while sock.recv(65536):
            pass
    assert server.refused == before + 1
    assert_serving(server)


def test_garbage_after_handshake_closes_only_that_connection(make_server: MakeServer) -> None:
    server = make_server(secret=SECRET)
    bad = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    good = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    bad.sock.sendall(os.urandom(PREFIX.size))
    refusal = bad.recv()
    assert refusal.type == ERROR
    assert refusal.header['code'] == 'protocol'
    with pytest.raises(WireConnectionError, match='closed'):
        bad.recv()
    bad.close()
    assert good.request(ECHO, {'k': 2}).header == {'k': 2}
    good.close()


def test_unreachable_server_fails_fast() -> None:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    with pytest.raises(WireConnectionError, match=f'127.0.0.1:{port}'):
        SyncConnection('127.0.0.1', port, secret=SECRET, timeout=5)


def test_request_times_out_instead_of_hanging(make_server: MakeServer) -> None:
    async def silent(conn: object, frame: object) -> None:
        return None

    server = make_server(secret=SECRET, handler=silent)
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET, timeout=0.5)
    with pytest.raises(WireConnectionError, match='timed out'):
        conn.request(ECHO)


def test_prefix_layout_is_stable() -> None:
    # docs/wire.md promises this layout for every version: magic, then version.
    head = encode_head(FIRST_APP_TYPE, {'a': 1}, [5], request_id=7, flags=3)
    assert head[:4] == b'TTHR'
    assert head[4] == PROTOCOL_VERSION
    _, _, flags, mtype, rid, hlen, count = PREFIX.unpack(head[: PREFIX.size])
    assert (flags, mtype, rid, hlen, count) == (3, FIRST_APP_TYPE, 7, 7, 1)
    assert struct.unpack('!Q', head[PREFIX.size : PREFIX.size + 8]) == (5,)
    assert head[PREFIX.size + 8 :] == b'{"a":1}'


@pytest.fixture(scope='module')
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp('tls')
    cert, key = d / 'cert.pem', d / 'key.pem'
    subprocess.run(
        [
            *('openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes'),
            *('-keyout', str(key), '-out', str(cert), '-days', '1'),
            *('-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost'),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_tls(make_server: MakeServer, certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    server = make_server(secret=SECRET, ssl=server_ctx)
    client_ctx = ssl.create_default_context(cafile=str(cert))
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET, ssl=client_ctx)
    big = os.urandom(2 * 1024 * 1024)
    reply = conn.request(ECHO, {'tls': True}, [big, [b'a', b'b']])
    conn.close()
    assert reply.header == {'tls': True}
    assert bytes(reply.payloads[0]) == big
    assert bytes(reply.payloads[1]) == b'ab'
    # A plain-text client is refused cleanly, and an untrusting client too.
    with pytest.raises(WireConnectionError):
        SyncConnection('127.0.0.1', server.port, secret=SECRET, timeout=5)
    with pytest.raises(WireConnectionError):
        SyncConnection(
            '127.0.0.1',
            server.port,
            secret=SECRET,
            ssl=ssl.create_default_context(),
            timeout=5,
        )
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET, ssl=client_ctx)
    assert conn.request(ECHO, {'again': 1}).header == {'again': 1}
    conn.close()


def test_large_headers_and_many_payloads(make_server: MakeServer) -> None:
    # Larger than the server's 64 KiB read buffer, and many payloads of mixed sizes.
    server = make_server(secret=SECRET)
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET)
    header = {'ids': [f'{i:032x}' for i in range(10_000)]}
    payloads = [bytes([i % 256]) * (i % 7) * 1000 for i in range(300)]
    reply = conn.request(ECHO, header, payloads)
    assert reply.header == header
    assert [bytes(p) for p in reply.payloads] == payloads
    conn.close()
