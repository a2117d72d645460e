"""Issue 14: the Redis connector reads a large ``bytes`` value into its final object.

A value serialized as ``bytes`` used to be read into a buffer and then copied into a new
``bytes`` by the deserializer (at 100 MB: the copy and the fresh pages it faults in).
``RedisConnector.get_decoded`` reads the framing first and the rest straight into the
``bytes`` it returns; anything else is read and deserialized as before. A value whose
length does not match its framing is refused as corrupt, with the connection in step.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest

from tests.conftest import REDIS_HOST, REDIS_PORT
from tether import _hugebytes
from tether.connectors._redis_io import Decoded
from tether.connectors.redis import RedisConnector, RedisKey
from tether.exceptions import SerializationError
from tether.serialize import BYTES_HEAD, framed_bytes_size, serialize, serialize_parts
from tether.store import Store


def _data(size: int) -> bytes:
    return bytes(range(251)) * (size // 251) + b'z' * (size % 251)


@pytest.fixture
def small_chunks(chunked_redis: Any) -> RedisConnector:
    return chunked_redis(70_000)


def test_framed_bytes_size_reads_only_a_bytes_framing() -> None:
    for value in (b'', b'abc', _data(300_000)):
        assert framed_bytes_size(serialize(value)[:BYTES_HEAD]) == len(value)
    for other in (bytearray(b'abc'), 'abc', [1, 2], 3):
        assert framed_bytes_size(serialize(other)[:BYTES_HEAD]) is None
    assert framed_bytes_size(b'TZ') is None
    assert framed_bytes_size(b'\0' * BYTES_HEAD) is None


def test_empty_bytes_is_filled_through_its_view() -> None:
    made = _hugebytes.empty_bytes(300_000)
    if made is None:
        pytest.skip('not CPython on Linux')
    obj, view = made
    view[:] = _data(300_000)
    del view
    assert type(obj) is bytes
    assert obj == _data(300_000)
    assert hash(obj) == hash(_data(300_000))
    assert _hugebytes.empty_bytes(100) is None  # small: the copy is cheaper


@pytest.mark.parametrize('size', [0, 10, 300_000, 1_000_000, 10_000_000])
def test_get_decoded_returns_the_bytes(redis_connector: RedisConnector, size: int) -> None:
    data = _data(size)
    key = redis_connector.put_parts(serialize_parts(data))
    got = redis_connector.get_decoded(key)
    assert got is not None
    value, nbytes = got
    assert type(value) is bytes
    assert value == data
    assert nbytes == len(data) + BYTES_HEAD
    # Large ones are read straight into the object returned (as a string or in chunks).
    direct = redis_connector._get_direct(key.redis_key, decode=True)
    assert isinstance(direct, Decoded) == (
        size >= 300_000 and _hugebytes.empty_bytes(size) is not None
    )
    assert redis_connector.get_decoded(RedisKey(key.redis_key + 'missing')) is None


def test_get_decoded_reads_many_chunks(small_chunks: RedisConnector) -> None:
    data = _data(1_000_003)  # 15 chunks
    key = small_chunks.put_parts(serialize_parts(data))
    assert small_chunks.get_decoded(key) == (data, len(data) + BYTES_HEAD)
    assert small_chunks.get(key) == serialize(data)  # get still returns the serialization


def test_get_decoded_deserializes_other_values(small_chunks: RedisConnector) -> None:
    np = pytest.importorskip('numpy')
    for value in ('x' * 300_000, bytearray(_data(300_000)), [1, 'two'], b'short'):
        key = small_chunks.put_parts(serialize_parts(value))
        got = small_chunks.get_decoded(key)
        assert got is not None
        assert type(got[0]) is type(value)
        assert got[0] == value
    array = np.arange(100_000, dtype=np.float64)
    key = small_chunks.put_parts(serialize_parts(array))
    got = small_chunks.get_decoded(key)
    assert got is not None
    assert (got[0] == array).all()


@pytest.mark.parametrize('chunked', [False, True])
@pytest.mark.parametrize('extra', [-5, 5])
def test_a_value_longer_or_shorter_than_its_framing_is_corrupt(
    redis_connector: RedisConnector,
    redis_client: Any,
    unique_prefix: str,
    chunked: bool,
    extra: int,
) -> None:
    head = serialize(_data(400_000))[:BYTES_HEAD]  # says 400,000 bytes follow
    body = _data(400_000 + extra)
    name = f'{unique_prefix}lying'
    if chunked:
        redis_client.rpush(name, head + body[:200_000], body[200_000:])
    else:
        redis_client.set(name, head + body)
    with pytest.raises(SerializationError, match='expected 400000'):
        redis_connector.get_decoded(RedisKey(name))
    # The whole reply was read: the connection is in step for the next request.
    assert redis_connector.get(RedisKey(name)) == head + body
    good = redis_connector.put_parts(serialize_parts(_data(400_000)))
    assert redis_connector.get_decoded(good) == (_data(400_000), 400_000 + BYTES_HEAD)


@pytest.mark.parametrize('chunked', [False, True])
def test_a_framing_claiming_more_than_the_value_holds_allocates_nothing_of_its_size(
    redis_connector: RedisConnector, redis_client: Any, unique_prefix: str, chunked: bool
) -> None:
    # A framing that says 1 TiB follows, in a value of 300 KB: refused as corrupt, not
    # a 1 TiB allocation (MemoryError) on the reader's side.
    head = bytearray(serialize(_data(300_000))[:BYTES_HEAD])
    struct.pack_into('<Q', head, 8, 1 << 40)  # the size follows the 8-byte prefix
    assert framed_bytes_size(head) == 1 << 40
    body = _data(300_000)
    name = f'{unique_prefix}boastful'
    if chunked:
        redis_client.rpush(name, bytes(head) + body[:150_000], body[150_000:])
    else:
        redis_client.set(name, bytes(head) + body)
    with pytest.raises(SerializationError):
        redis_connector.get_decoded(RedisKey(name))
    assert redis_connector.get(RedisKey(name)) == bytes(head) + body


def test_a_store_reads_through_get_decoded_unless_it_has_a_deserializer(
    redis_connector: RedisConnector,
    unique_prefix: str,
) -> None:
    data = _data(1_000_000)
    with Store('decoded', redis_connector, cache_size=0) as store:
        assert store.capabilities.decoding is redis_connector
        assert store.get(store.put(data)) == data
    seen: list[Any] = []

    def deserializer(raw: Any) -> Any:
        seen.append(type(raw))
        from tether.serialize import deserialize

        return deserialize(raw)

    other = RedisConnector(REDIS_HOST, REDIS_PORT, prefix=unique_prefix)
    with Store('own', other, cache_size=0, deserializer=deserializer) as store:
        assert store.get(store.put(data)) == data
    assert seen == [memoryview]
