"""The RedisConnector's direct GET reader (reply read into one preallocated buffer)."""

from __future__ import annotations

from typing import Any

import pytest

from tether.connectors.redis import RedisConnector, RedisKey
from tether.exceptions import ConnectorError


@pytest.fixture
def small_chunks(chunked_redis: Any) -> RedisConnector:
    return chunked_redis(1000)


@pytest.mark.parametrize('size', [0, 1, 65_536 - 10, 65_536, 3 * 1024 * 1024 + 7])
def test_sizes_around_the_header_buffer(redis_connector: RedisConnector, size: int) -> None:
    data = bytes(range(256)) * (size // 256) + b'x' * (size % 256)
    key = redis_connector.put(data)
    value = redis_connector.get(key)
    assert isinstance(value, memoryview)
    assert not value.readonly
    assert value == data
    # The connection is left at a clean reply boundary: the next command works.
    assert redis_connector.exists(key)
    assert redis_connector.get(key) == data


def test_chunked_values_fall_back_to_lists(small_chunks: RedisConnector) -> None:
    data = b'abc' * 1000
    key = small_chunks.put(data)
    assert bytes(small_chunks.get(key) or b'') == data


def test_missing_key(redis_connector: RedisConnector, unique_prefix: str) -> None:
    assert redis_connector.get(RedisKey(f'{unique_prefix}nope')) is None


def test_error_reply_is_a_connector_error(
    redis_connector: RedisConnector,
    redis_client: Any,
    unique_prefix: str,
) -> None:
    name = f'{unique_prefix}hash'
    redis_client.hset(name, 'f', 'v')
    with pytest.raises(ConnectorError, match=r'WRONGTYPE|wrong kind'):
        # a hash is neither a string nor the list of a chunked value
        redis_connector.get(RedisKey(name))
    assert redis_connector.get(RedisKey(f'{unique_prefix}other')) is None
