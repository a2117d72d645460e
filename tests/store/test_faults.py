"""Faults: dead servers, removed directories, writers killed mid-write, oversized values."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tether.connectors.file import FileConnector, FileKey, remove_temporaries
from tether.connectors.redis import RedisConnector
from tether.connectors.shared_memory import SHM_DIR, SharedMemoryConnector, cleanup
from tether.exceptions import ConnectorError, ProxyResolveMissingKeyError, SerializationError
from tether.serialize import deserialize
from tether.store import Store
from tether.testing import RedisServer, free_port, redis_server_fixture

# A redis-server of the test's own, on a free port (never the shared one).
private_redis = redis_server_fixture()


def test_redis_down_raises_connector_error_promptly_and_recovers(
    private_redis: RedisServer,
) -> None:
    connector = RedisConnector('127.0.0.1', private_redis.port, retries=2, connect_timeout=1)
    store = Store('faulty', connector, cache_size=0)
    key = store.put(np.arange(10))
    private_redis.stop()
    start = time.monotonic()
    with pytest.raises(ConnectorError, match=str(private_redis.port)) as info:
        store.put(np.arange(10))
    assert info.value.__cause__ is not None
    with pytest.raises(ConnectorError):
        store.get(key)
    with pytest.raises(ConnectorError):
        store.exists(key)
    # Bounded: a few retries with back-off, far from a hang (the per-test timeout is the
    # hard bound; this is the behaviour, not a performance assertion).
    assert time.monotonic() - start < 60
    private_redis.start()
    key2 = store.put('back')
    assert store.get(key2) == 'back'
    connector.close()


def test_redis_down_during_resolve_raises_connector_error(private_redis: RedisServer) -> None:
    connector = RedisConnector('127.0.0.1', private_redis.port, retries=1, connect_timeout=1)
    store = Store('faulty2', connector, cache_size=0)
    p = store.proxy([1, 2], populate_target=False)
    private_redis.stop()
    with pytest.raises(ConnectorError):
        len(p)
    connector.close()


def test_redis_unreachable_from_the_start() -> None:
    connector = RedisConnector('127.0.0.1', free_port(), retries=1, connect_timeout=0.5)
    with pytest.raises(ConnectorError, match='Is the server running'):
        connector.put(b'x')
    connector.close()


def test_redis_closed_connector() -> None:
    from tether.exceptions import ConnectorClosedError

    connector = RedisConnector('127.0.0.1', 6379)
    connector.close()
    with pytest.raises(ConnectorClosedError):
        connector.put(b'x')


def test_redis_values_over_the_chunk_size(redis_connector: RedisConnector) -> None:
    small = RedisConnector('127.0.0.1', 6379, prefix=redis_connector.prefix, chunk_size=1 << 20)
    data = os.urandom(3 * (1 << 20) + 123)
    key = small.put(data)
    assert small.exists(key)
    assert bytes(small.get(key)) == data  # type: ignore[arg-type]
    assert [bytes(x) for x in small.get_batch([key])] == [data]  # type: ignore[arg-type]
    key2 = small.new_key()
    small.set(key2, data)
    assert bytes(small.get(key2)) == data  # type: ignore[arg-type]
    keys = small.put_batch([data, b'tiny'])
    assert [bytes(x) for x in small.get_batch(keys)] == [data, b'tiny']  # type: ignore[arg-type]
    small.evict(key)
    assert not small.exists(key)
    assert small.get(key) is None
    small.close()


@pytest.mark.slow
def test_redis_value_larger_than_512mb(redis_connector: RedisConnector) -> None:
    size = 512 * 1024 * 1024 + 4096
    data = np.full(size, 7, dtype=np.uint8)
    data[-1] = 9
    store = Store('huge', redis_connector, cache_size=0)
    key = store.put(data)
    out = store.get(key)
    assert out.shape == data.shape
    assert out[-1] == 9
    assert out[0] == 7
    del out
    store.evict(key)


def test_file_directory_removed_gives_clear_error(tmp_path: Path) -> None:
    connector = FileConnector(tmp_path / 'objects')
    key = connector.put(b'x')
    shutil.rmtree(tmp_path / 'objects')
    with pytest.raises(ConnectorError, match='no longer exists'):
        connector.get(key)
    with pytest.raises(ConnectorError, match='no longer exists'):
        connector.put(b'y')
    with pytest.raises(ConnectorError, match='no longer exists'):
        connector.evict(FileKey('abc'))


def test_file_invalid_key_rejected(tmp_path: Path) -> None:
    connector = FileConnector(tmp_path)
    with pytest.raises(ConnectorError, match='invalid'):
        connector.get(FileKey('../etc/passwd'))


WRITER = """
import sys, numpy as np
from tether.store import Store
from tether.testing import RedisServer, free_port, redis_server_fixture
{make}
store = Store('killed', connector)
data = np.ones(400 * 1024 * 1024 // 8)
print('ready', flush=True)
while True:
    print('writing', flush=True)
    store.put(data)
"""


def _kill_writer_mid_put(make: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, '-c', WRITER.format(make=make)],
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b'ready'
    # Killed as its second write starts: after one complete object, in the middle of
    # copying 400 MB (the write follows the line at once).
    assert proc.stdout.readline().strip() == b'writing'
    assert proc.stdout.readline().strip() == b'writing'
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()


def _assert_all_complete(objects: list[Any]) -> None:
    for data in objects:
        out = deserialize(data)
        assert out.size == 400 * 1024 * 1024 // 8
        assert float(out[-1]) == 1.0


def test_file_writer_killed_mid_write_leaves_no_partial_object(tmp_path: Path) -> None:
    d = tmp_path / 'killed'
    _kill_writer_mid_put(
        f'from tether.connectors.file import FileConnector\nconnector = FileConnector({str(d)!r})'
    )
    connector = FileConnector(d)
    names = [e.name for e in os.scandir(d)]
    visible = [n for n in names if not n.startswith('.')]
    _assert_all_complete([connector.get(FileKey(n)) for n in visible])
    remove_temporaries(d)
    assert all(not e.name.startswith('.tmp-') for e in os.scandir(d))


def test_shm_writer_killed_mid_write_leaves_no_partial_object(shm_namespace: str) -> None:
    _kill_writer_mid_put(
        'from tether.connectors.shared_memory import SharedMemoryConnector\n'
        f'connector = SharedMemoryConnector({shm_namespace!r})',
    )
    connector = SharedMemoryConnector(shm_namespace)
    prefix = f'tether-{shm_namespace}-'
    names = [e.name for e in os.scandir(SHM_DIR) if e.name.startswith(prefix)]
    from tether.connectors.shared_memory import SharedMemoryKey

    visible = [n for n in names if not n.endswith('.tmp')]
    _assert_all_complete([connector.get(SharedMemoryKey(n)) for n in visible])
    assert cleanup(shm_namespace) == len(names)


def test_redis_writer_killed_mid_write_leaves_no_partial_object(
    redis_connector: RedisConnector,
    redis_client: Any,
) -> None:
    prefix = redis_connector.prefix
    _kill_writer_mid_put(
        'from tether.connectors.redis import RedisConnector\n'
        f"connector = RedisConnector('127.0.0.1', 6379, prefix={prefix!r})",
    )
    from tether.connectors.redis import RedisKey

    keys = [k.decode() for k in redis_client.scan_iter(match=f'{prefix}*')]
    # A value in chunks is pushed onto '<key>:writing', renamed to its key once complete:
    # an unfinished one is never under a key, and expires.
    temporaries = [k for k in keys if k.endswith(':writing')]
    assert all(redis_client.ttl(k) > 0 for k in temporaries)
    visible = [k for k in keys if k not in temporaries]
    _assert_all_complete([redis_connector.get(RedisKey(k)) for k in visible])


def test_shm_objects_outlive_the_producer(shm_namespace: str) -> None:
    code = (
        'import pickle, sys, numpy as np\n'
        'from tether.store import Store\n'
        'from tether.connectors.shared_memory import SharedMemoryConnector\n'
        f'store = Store("outlive", SharedMemoryConnector({shm_namespace!r}))\n'
        'p = store.proxy(np.arange(1000.0))\n'
        'sys.stdout.buffer.write(pickle.dumps(p))\n'
    )
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, check=True)
    import pickle

    p = pickle.loads(out.stdout)
    assert float(np.sum(p)) == float(np.arange(1000.0).sum())


def test_shm_resolve_is_a_copy_on_write_mapping(shm_namespace: str) -> None:
    store = Store('cow', SharedMemoryConnector(shm_namespace), cache_size=0)
    key = store.put(np.zeros(1000))
    a = store.get(key)
    a[0] = 5.0  # writable, private to this consumer
    b = store.get(key)
    assert b[0] == 0.0


def test_evicted_shm_object_is_missing(shm_namespace: str) -> None:
    store = Store('gone', SharedMemoryConnector(shm_namespace))
    p = store.proxy([1], evict=True, populate_target=False)
    assert p == [1]
    q = store.proxy_from_key(__import__('tether.store', fromlist=['get_key']).get_key(p))
    with pytest.raises(ProxyResolveMissingKeyError):
        len(q)


def test_corrupt_object_in_redis_raises_serialization_error(
    redis_connector: RedisConnector,
) -> None:
    store = Store('corrupt', redis_connector)
    key = redis_connector.put(b'TZ\x01\x03garbage')
    with pytest.raises(SerializationError):
        store.get(key)


def test_redis_interrupted_round_trip_does_not_poison_the_pool(
    redis_connector: RedisConnector,
) -> None:
    # An interrupt after a command went out (its reply unread) must not hand that
    # connection back to the pool: the next user would read the stale reply. No retries,
    # so that a reconnect cannot mask a poisoned connection.
    redis_connector = RedisConnector('127.0.0.1', 6379, prefix=redis_connector.prefix, retries=0)
    key = redis_connector.put(b'first')

    class Interrupted(BaseException):
        pass

    def interrupt(reader: Any) -> None:
        raise Interrupted

    from tether.connectors._redis_io import Packer

    command = Packer()
    command.command(b'GET', key.redis_key)
    pool = redis_connector._router.pool_for(key.redis_key)
    with pytest.raises(Interrupted):
        redis_connector._raw.round_trip(pool, command, interrupt)
    # With one pooled connection, a poisoned pool would answer this SET with the stale
    # bulk reply of the interrupted GET.
    key2 = redis_connector.put(b'second')
    assert bytes(redis_connector.get(key2)) == b'second'  # type: ignore[arg-type]
    assert bytes(redis_connector.get(key)) == b'first'  # type: ignore[arg-type]
    redis_connector.close()
