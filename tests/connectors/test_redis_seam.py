"""The Redis connector's seams: its own connections, the serializer's direct target."""

from __future__ import annotations

import os
import pathlib
import re
import socket
import uuid

import pytest

from tether.connectors.redis import RedisConnector, RedisKey
from tether.exceptions import ConnectorError
from tether.serialize import BYTES_HEAD, direct_target, serialize
from tether.testing import RedisServer

SRC = pathlib.Path(__file__).resolve().parents[2] / 'src' / 'tether' / 'connectors'


def test_direct_target_is_the_serializers_answer() -> None:
    big = os.urandom(1 << 20)
    data = serialize(big)
    made = direct_target(data[:BYTES_HEAD], len(data))
    assert made is not None
    obj, view = made
    view[:] = memoryview(data)[BYTES_HEAD:]
    assert obj == big
    # A limit smaller than the framing claims, or another kind of object: no target.
    assert direct_target(data[:BYTES_HEAD], len(data) - 1) is None
    assert direct_target(serialize([1, 2, 3])[:BYTES_HEAD], 1 << 30) is None


def test_the_connector_reads_no_private_socket_and_no_framing() -> None:
    for path in sorted(SRC.glob('*redis*.py')):
        text = path.read_text()
        assert re.search(r'\bconn\w*\._sock\b', text) is None, path.name  # redis-py's
        assert 'framed_bytes_size' not in text, path.name
        assert 'empty_bytes' not in text, path.name
    assert len((SRC / 'redis.py').read_text().splitlines()) < 600


def test_own_connections_authenticate_and_select_the_database() -> None:
    password = uuid.uuid4().hex
    acl = ['--user', 'default', 'on', 'nopass', '-@all', '+ping']  # (PING: ready)
    acl += ['--user', 'app', 'on', f'>{password}', '~*', '&*', '+@all']
    with RedisServer(args=acl) as server:
        c = RedisConnector(
            server.host, server.port, username='app', password=password, db=3, prefix='seam:'
        )
        try:
            key = c.put(b'in db 3')
            assert bytes(c.get(key) or b'') == b'in db 3'
            assert c.get_batch([key]) == [b'in db 3']
            assert c.client.connection_pool.connection_kwargs['db'] == 3
            assert c.client.exists(key.redis_key) == 1  # redis-py's pool sees db 3 too
        finally:
            c.close(clear=True)
        wrong = RedisConnector(server.host, server.port, username='app', password='wrong')
        with pytest.raises(ConnectorError, match='refused the credentials'):
            wrong.put(b'x')
        wrong.close()


def test_a_forked_child_opens_connections_of_its_own(redis_connector: RedisConnector) -> None:
    key = redis_connector.put(b'parent')
    pool = redis_connector._router.pool_for(key.redis_key)
    conn = pool.get()
    pool.release(conn)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        ok = pool.get() is not conn and bytes(redis_connector.get(key) or b'') == b'parent'
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert pool.get() is conn  # the parent's connection is still the parent's


def test_a_forked_child_never_waits_on_the_parents_pool_lock(
    redis_connector: RedisConnector,
) -> None:
    import signal

    key = redis_connector.put(b'parent')
    pool = redis_connector._router.pool_for(key.redis_key)
    with pool._lock:  # (as another thread of the parent may hold it at the fork)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            signal.alarm(30)  # a child stuck on the inherited lock dies, never hangs
            ok = bytes(redis_connector.get(key) or b'') == b'parent'
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_close_leaves_no_connection_open_on_the_server() -> None:
    import redis

    with RedisServer() as server, redis.Redis(server.host, server.port) as watcher:
        before = len(watcher.client_list())
        connectors = [RedisConnector(server.host, server.port, prefix='x:') for _ in range(3)]
        for c in connectors:
            assert not c.exists(c.put(b'a') and c.new_key())
        assert len(watcher.client_list()) > before
        for c in connectors:
            c.close(clear=True)
        assert len(watcher.client_list()) == before


def test_evict_and_exists_use_the_raw_path_at_interpreter_exit(
    redis_connector: RedisConnector,
) -> None:
    # An owned proxy dropped at interpreter exit evicts through a connector that never
    # opened a redis-py connection: opening one then fails (redis-py reads package
    # metadata while modules are torn down), so evict and exists must not need one.
    import subprocess
    import sys

    prefix = redis_connector.prefix
    code = (
        'from tether.connectors.redis import RedisConnector\n'
        f'c = RedisConnector(prefix={prefix!r})\n'
        'key = c.put(b"x")  # the raw path only: no redis-py connection is open\n'
        'class Later:\n'
        '    def __del__(self):\n'
        '        c.evict(key)\n'
        '        assert not c.exists(key)\n'
        'import builtins\n'
        'builtins._later = Later()  # collected while the interpreter finalizes\n'
    )
    command = [sys.executable, '-c', code]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert 'Exception ignored' not in done.stderr, done.stderr
    assert list(redis_connector.client.scan_iter(match=f'{prefix}*')) == []


def test_replies_are_matched_by_count_and_a_connection_out_of_step_is_dropped(
    redis_available: None,
) -> None:
    # (no ECHO per request: a connection goes back to the pool only once as many whole
    # replies as commands were read, with no byte left over)
    from tether.connectors._redis_io import Packer

    c = RedisConnector('127.0.0.1', 6379, prefix=f'seam-{uuid.uuid4().hex}:')
    try:
        key = c.put(b'value')
        pool = c._router.pool_for(key.redis_key)
        packer = Packer()
        packer.command('PING')
        packer.command('PING')
        with pytest.raises(ConnectorError, match='1 replies read for 2 commands'):
            c._raw.round_trip(pool, packer, lambda reader: reader.simple())
        assert not pool._idle  # dropped, never pooled with a reply unread
        assert bytes(c.get(key) or b'') == b'value'
        assert len(pool._idle) == 1  # a request read whole goes back to the pool
    finally:
        c.close(clear=True)


def test_a_get_is_one_command_and_a_value_in_chunks_one_more() -> None:
    import redis

    with RedisServer() as server, redis.Redis(server.host, server.port) as watcher:
        c = RedisConnector(server.host, server.port, prefix='one:', chunk_size=1000)
        try:
            small, chunked = c.put(b's' * 100), c.put(os.urandom(3500))
            watcher.config_resetstat()
            for _ in range(5):
                assert bytes(c.get(small) or b'') == b's' * 100
            stats = watcher.info('commandstats')
            assert stats['cmdstat_get']['calls'] == 5
            assert 'cmdstat_lrange' not in stats  # (it used to go with every GET)
            assert c.get(c.new_key()) is None
            value = c.get(chunked)
            assert value is not None
            assert len(value) == 3500
            stats = watcher.info('commandstats')
            assert stats['cmdstat_lrange']['calls'] == 1
            # A batch: one GET each, and one LRANGE for the value in chunks.
            watcher.config_resetstat()
            small_value, chunked_value = c.get_batch([small, chunked])
            assert small_value == b's' * 100
            assert chunked_value == bytes(value)
            stats = watcher.info('commandstats')
            assert stats['cmdstat_get']['calls'] == 2
            assert stats['cmdstat_lrange']['calls'] == 1
        finally:
            c.close(clear=True)


def _silent_server() -> socket.socket:
    # Listens and never accepts: the kernel completes each connection, and nothing ever
    # answers (nor reads).
    listener = socket.socket()
    listener.bind(('127.0.0.1', 0))
    listener.listen(16)
    return listener


@pytest.mark.parametrize('retries', [0, 1])
def test_a_server_that_never_answers_is_a_timeout_not_a_hang(retries: int) -> None:
    with _silent_server() as listener:
        port = listener.getsockname()[1]
        c = RedisConnector('127.0.0.1', port, socket_timeout=0.2, retries=retries)
        try:
            with pytest.raises(ConnectorError, match='timed out reading a reply'):
                c.get(RedisKey('x'))
            with pytest.raises(ConnectorError, match='unreachable during put'):
                c.put(b'x')
            # Nothing reads: a value larger than the socket buffers times out sending.
            with pytest.raises(ConnectorError, match='timed out sending a request'):
                c.put(bytes(64 << 20))
        finally:
            c.close()


def test_own_connections_block_in_the_kernel_with_kernel_timeouts(
    redis_connector: RedisConnector,
) -> None:
    # (settimeout would make CPython poll before every send and receive)
    import struct

    key = redis_connector.put(b'x')
    pool = redis_connector._router.pool_for(key.redis_key)
    conn = pool.get()
    try:
        assert conn.sock.gettimeout() is None
        raw = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, 16)
        seconds, micros = struct.unpack('ll', raw)
        assert seconds + micros / 1e6 == pytest.approx(redis_connector.socket_timeout)
    finally:
        pool.release(conn)


def test_a_pooled_connection_with_bytes_waiting_is_never_lent(
    redis_connector: RedisConnector,
) -> None:
    import select

    from tether.connectors._redis_conn import send_all

    key = redis_connector.put(b'mine')
    pool = redis_connector._router.pool_for(key.redis_key)
    stale = pool.get()
    send_all(stale.sock, [b'*1\r\n$4\r\nPING\r\n'], None)  # a reply nobody will read
    assert select.select([stale.sock], [], [], 10)[0]  # (it has arrived)
    pool.release(stale)
    conn = pool.get()
    assert conn is not stale
    assert stale.sock.fileno() == -1
    pool.release(conn)
    assert bytes(redis_connector.get(key) or b'') == b'mine'


def test_a_connection_whose_reader_holds_unread_bytes_is_not_pooled(
    redis_connector: RedisConnector,
) -> None:
    key = redis_connector.put(b'mine')
    pool = redis_connector._router.pool_for(key.redis_key)
    conn = pool.get()
    reader = conn.reader
    reader._end = reader._start + 1  # a byte read from the socket and not consumed
    pool.release(conn)
    assert conn.sock.fileno() == -1  # closed, not lent again
    assert bytes(redis_connector.get(key) or b'') == b'mine'
