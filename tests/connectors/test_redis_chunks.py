"""Issue 14: large values are stored in Redis as lists of chunks under 4 MiB.

Redis's allocator returns allocations of 8 MiB and more to the kernel as soon as they
are freed, so a large string costs the server a page fault per page on every SET and
GET; chunks reuse memory. These tests check the layout and that every way of reading
and writing it keeps the value intact and the connection in step.
"""

from __future__ import annotations

from typing import Any

import pytest

from tether.connectors._redis_io import Packer, split
from tether.connectors.redis import RedisConnector, RedisKey
from tether.exceptions import ConnectorError
from tether.store import Store

MiB = 1024 * 1024


def _data(size: int, salt: int = 0) -> bytes:
    return bytes((i * 7 + salt) % 251 for i in range(251)) * (size // 251) + b'z' * (size % 251)


@pytest.fixture
def small_chunks(chunked_redis: Any) -> RedisConnector:
    return chunked_redis(1000)


def test_default_chunk_size_is_under_4_mib(redis_connector: RedisConnector) -> None:
    assert 4 * MiB - 4096 <= redis_connector.chunk_size < 4 * MiB
    assert redis_connector.config()['chunk_size'] == redis_connector.chunk_size


def test_a_10_mb_value_is_a_list_of_equal_chunks(
    redis_connector: RedisConnector,
    redis_client: Any,
) -> None:
    data = _data(10_000_000)
    key = redis_connector.put(data)
    assert redis_client.type(key.redis_key) == b'list'
    assert redis_client.ttl(key.redis_key) == -1  # not the temporary key's expiry
    assert not redis_client.exists(key.redis_key + ':writing')
    sizes = [len(c) for c in redis_client.lrange(key.redis_key, 0, -1)]
    assert len(sizes) == 3
    assert max(sizes) <= redis_connector.chunk_size
    assert max(sizes) - min(sizes) <= 1
    value = redis_connector.get(key)
    assert isinstance(value, memoryview)
    assert not value.readonly
    assert value == data
    # The connection is at a clean reply boundary: the next commands work.
    assert redis_connector.exists(key)
    assert redis_connector.get_batch([key]) == [data]


def test_a_value_of_chunk_size_stays_a_string(
    small_chunks: RedisConnector,
    redis_client: Any,
) -> None:
    key = small_chunks.put(_data(1000))
    assert redis_client.type(key.redis_key) == b'string'
    bigger = small_chunks.put(_data(1001))
    assert redis_client.type(bigger.redis_key) == b'list'
    assert [len(c) for c in redis_client.lrange(bigger.redis_key, 0, -1)] == [501, 500]
    assert small_chunks.get(bigger) == _data(1001)


@pytest.mark.parametrize('size', [1001, 2999, 3000, 3001, 65_536 * 3 + 5])
def test_chunked_sizes_round_trip(small_chunks: RedisConnector, size: int) -> None:
    data = _data(size)
    key = small_chunks.put(data)
    assert small_chunks.get(key) == data
    parts = [data[:10], memoryview(data)[10:777], data[777:]]
    key = small_chunks.put_parts(parts)
    assert small_chunks.get(key) == data
    keys = small_chunks.put_parts_batch([[data], [b'small'], parts])
    assert small_chunks.get_batch(keys) == [data, b'small', data]
    keys = small_chunks.put_batch([data, b'small'])
    assert [small_chunks.get(k) for k in keys] == [data, b'small']


def test_set_replaces_a_chunked_value(small_chunks: RedisConnector) -> None:
    key = small_chunks.new_key()
    small_chunks.set(key, _data(5000, salt=1))
    small_chunks.set(key, _data(2500, salt=2))  # not appended to the first list
    assert small_chunks.get(key) == _data(2500, salt=2)
    small_chunks.set(key, b'now a string')
    assert small_chunks.get(key) == b'now a string'
    assert small_chunks.wait(key, timeout=1)


def test_lists_written_by_others_are_read(
    redis_connector: RedisConnector,
    redis_client: Any,
    unique_prefix: str,
) -> None:
    # A later chunk longer than the first (the reader grows its buffer) ...
    name = f'{unique_prefix}uneven'
    redis_client.rpush(name, b'ab', b'cdefghij' * 10_000, b'k')
    assert redis_connector.get(RedisKey(name)) == b'ab' + b'cdefghij' * 10_000 + b'k'
    # ... and a large value stored as one string (by earlier versions) still reads.
    name = f'{unique_prefix}string'
    redis_client.set(name, _data(5 * MiB))
    assert redis_connector.get(RedisKey(name)) == _data(5 * MiB)
    assert redis_connector.get(RedisKey(f'{unique_prefix}missing')) is None


def test_neither_string_nor_list_is_a_connector_error(
    redis_connector: RedisConnector,
    redis_client: Any,
    unique_prefix: str,
) -> None:
    name = f'{unique_prefix}set'
    redis_client.sadd(name, 'member')
    with pytest.raises(ConnectorError, match='WRONGTYPE'):
        redis_connector.get(RedisKey(name))
    assert redis_connector.get(RedisKey(f'{unique_prefix}other')) is None


def test_a_store_round_trips_large_objects(redis_connector: RedisConnector) -> None:
    np = pytest.importorskip('numpy')
    with Store('chunks', redis_connector) as store:
        array = np.arange(1_500_000, dtype=np.float64)  # 12 MB
        assert (store.get(store.put(array)) == array).all()
        data = _data(9 * MiB)
        assert store.get(store.put(data)) == data


def test_evict_deletes_a_chunked_value(
    small_chunks: RedisConnector,
    redis_client: Any,
) -> None:
    key = small_chunks.put(_data(4000))
    small_chunks.evict(key)
    assert not small_chunks.exists(key)
    assert small_chunks.get(key) is None
    assert redis_client.exists(key.redis_key) == 0


def test_a_refused_chunked_write_raises_and_leaves_the_connection_in_step() -> None:
    from tether.testing import RedisServer

    # A server out of memory refuses the RPUSH as it is queued; EXEC then aborts.
    with RedisServer(args=['--maxmemory', '2mb']) as server:
        connector = RedisConnector(
            '127.0.0.1', server.port, prefix='refused:', chunk_size=MiB, max_connections=1
        )
        try:
            with pytest.raises(ConnectorError, match=r'OOM|EXECABORT'):
                connector.put(_data(3 * MiB))
            # The same (only) connection answers the next requests in step.
            assert connector.get(RedisKey('refused:missing')) is None
            assert connector.client.ping()
        finally:
            connector.close()


def test_split_cuts_across_parts_without_copying() -> None:
    parts = [b'abc', bytearray(b'defgh'), memoryview(b'ijklmnopq')]
    chunks = list(split(parts, 4))
    joined = [b''.join(bytes(p) for p in chunk) for chunk in chunks]
    assert joined == [b'abcde', b'fghi', b'jklm', b'nopq']
    assert all(isinstance(p, memoryview) for chunk in chunks for p in chunk)
    assert [b''.join(bytes(p) for p in c) for c in split([b'', b'xy', b''], 2)] == [b'x', b'y']


def test_packer_keeps_large_buffers_and_joins_small_pieces() -> None:
    big = memoryview(bytes(100_000))
    packer = Packer()
    packer.command(b'MULTI')
    packer.array(3)
    packer.arg(b'SET')
    packer.arg('key')
    packer.bulk([memoryview(b'head'), big])
    out = packer.finish()
    assert len(out) == 3
    assert out[1] is big
    assert bytes(out[0]) == b'*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$100004\r\nhead'
    assert bytes(out[2]) == b'\r\n'
