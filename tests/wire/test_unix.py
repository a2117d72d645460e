"""A server's Unix socket: clients on its host skip the TCP stack, and fall back to TCP."""

from __future__ import annotations

import socket
import stat
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.wire.conftest import ECHO, ThreadServer
from tether._wire import SyncClient, SyncConnection
from tether.exceptions import AuthenticationError

SECRET = 'unix-secret'
MakeServer = Callable[..., ThreadServer]


def short_path(tmp_path: Path, name: str = 's.sock') -> Path:
    """A socket path that fits in ``sun_path`` (pytest's folders can be long)."""
    assert len(str(tmp_path / name)) < 100, tmp_path
    return tmp_path / name


def test_clients_on_the_host_use_the_socket(make_server: MakeServer, tmp_path: Path) -> None:
    path = short_path(tmp_path)
    server = make_server(secret=SECRET, unix_path=path)
    assert server.server.unix_address == str(path)
    assert stat.S_ISSOCK(path.stat().st_mode)
    assert path.stat().st_mode & 0o777 == 0o600
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET, unix_path=path)
    assert conn.unix
    assert conn.sock.family == socket.AF_UNIX
    assert conn.peer == f'unix:{path}'
    reply = conn.request(ECHO, {'x': 1}, [b'abc', bytearray(200_000)])
    assert reply.header == {'x': 1}
    assert [bytes(p[:3]) for p in reply.payloads] == [b'abc', b'\0\0\0']
    (served,) = server.server.connections
    assert served.peer.startswith('unix:')
    conn.close()
    # The pool passes the socket on to each connection it opens.
    client = SyncClient('127.0.0.1', server.port, secret=SECRET, unix_path=path)
    with client.connection() as pooled:
        assert pooled.unix
    assert client.request(ECHO, {'y': 2}).header == {'y': 2}
    client.close()


def test_a_wrong_secret_is_refused_on_the_socket(make_server: MakeServer, tmp_path: Path) -> None:
    path = short_path(tmp_path)
    server = make_server(secret=SECRET, unix_path=path)
    with pytest.raises(AuthenticationError):
        SyncConnection('127.0.0.1', server.port, secret='wrong', unix_path=path)
    # The server counts the refusal once the client has gone: wait for it.
    deadline = time.monotonic() + 10
    while server.refused == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.refused == 1
    good = SyncConnection('127.0.0.1', server.port, secret=SECRET, unix_path=path)
    assert good.unix
    good.close()


def test_no_socket_means_tcp(make_server: MakeServer, tmp_path: Path) -> None:
    server = make_server(secret=SECRET)
    assert server.server.unix_address is None
    for path in (
        tmp_path / 'missing.sock',  # nothing there
        tmp_path / ('x' * 150),  # too long for a Unix socket
    ):
        conn = SyncConnection('127.0.0.1', server.port, secret=SECRET, unix_path=path)
        assert not conn.unix
        assert conn.sock.family == socket.AF_INET
        assert conn.request(ECHO, {'z': 3}).header == {'z': 3}
        conn.close()
    # A socket file nobody listens on (a server on another host of a shared file system,
    # or one that died).
    dead = short_path(tmp_path, 'dead.sock')
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(dead))
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET, unix_path=dead)
    assert not conn.unix
    conn.close()


def test_a_stale_socket_is_replaced_and_removed_on_close(
    make_server: MakeServer, tmp_path: Path
) -> None:
    path = short_path(tmp_path)
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))  # left behind, as by a server that was killed
    server = make_server(secret=SECRET, unix_path=path)
    assert server.server.unix_address == str(path)
    conn = SyncConnection('127.0.0.1', server.port, secret=SECRET, unix_path=path)
    assert conn.unix
    conn.close()
    server.close()
    assert not path.exists()


def test_a_live_socket_or_another_file_is_left_alone(
    make_server: MakeServer, tmp_path: Path
) -> None:
    path = short_path(tmp_path)
    first = make_server(secret=SECRET, unix_path=path)
    second = make_server(secret='other', unix_path=path)
    assert first.server.unix_address == str(path)
    assert second.server.unix_address is None  # logged; it serves over TCP only
    conn = SyncConnection('127.0.0.1', first.port, secret=SECRET, unix_path=path)
    assert conn.unix  # still the first server's socket
    conn.close()
    second.close()
    assert stat.S_ISSOCK(path.stat().st_mode)  # the second does not remove what it lacks

    plain = tmp_path / 'plain'
    plain.write_text('not a socket')
    third = make_server(secret=SECRET, unix_path=plain)
    assert third.server.unix_address is None
    third.close()
    assert plain.read_text() == 'not a socket'


def test_a_server_removes_only_its_own_socket(make_server: MakeServer, tmp_path: Path) -> None:
    path = short_path(tmp_path)
    first = make_server(secret=SECRET, unix_path=path)
    assert first.server.unix_address == str(path)
    path.unlink()  # someone removed it, and a new server took the path meanwhile
    second = make_server(secret=SECRET, unix_path=path)
    assert second.server.unix_address == str(path)
    first.close()
    assert stat.S_ISSOCK(path.stat().st_mode)  # the second server's, still there
    conn = SyncConnection('127.0.0.1', second.port, secret=SECRET, unix_path=path)
    assert conn.unix
    conn.close()
    second.close()
    assert not path.exists()
