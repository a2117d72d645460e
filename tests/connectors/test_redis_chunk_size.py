"""Issue 8 item 16: ``RedisConnector(chunk_size=0)`` (or negative) raises ``ValueError``.

Before, the first put of a non-empty value looped forever with growing memory.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import REDIS_HOST, REDIS_PORT
from tether.connectors.redis import RedisConnector


@pytest.mark.parametrize('size', [0, -1, -(2**20), 1.5, True, '10'])
def test_bad_chunk_size_is_refused(size: Any) -> None:
    with pytest.raises(ValueError, match='chunk_size'):
        RedisConnector(REDIS_HOST, REDIS_PORT, prefix='never-used:', chunk_size=size)


def test_bad_chunk_size_in_a_config_is_refused() -> None:
    with pytest.raises(ValueError, match='chunk_size'):
        RedisConnector.from_config({'hostname': REDIS_HOST, 'port': REDIS_PORT, 'chunk_size': 0})


def test_small_chunk_size_round_trips(redis_client: Any, unique_prefix: str) -> None:
    connector = RedisConnector(REDIS_HOST, REDIS_PORT, prefix=unique_prefix, chunk_size=1)
    try:
        key = connector.put(b'abcdef')
        assert bytes(connector.get(key)) == b'abcdef'
    finally:
        connector.close(clear=True)
