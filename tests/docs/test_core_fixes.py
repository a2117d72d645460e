"""Regression tests for bugs in the core found while writing the docs."""

from __future__ import annotations

from typing import Any

import polars as pl
from polars.testing import assert_frame_equal

from tether.serialize import deserialize, serialize


def test_polars_frame_round_trip() -> None:
    # read_ipc lost its memory_map argument in polars 1.x/2.x: deserialize raised.
    df = pl.DataFrame({'a': [1, 2, 3], 'b': ['x', 'y', 'z']})
    out = deserialize(serialize(df))
    assert isinstance(out, pl.DataFrame)
    assert_frame_equal(out, df)


def test_redis_get_batch_reads_chunked_values(redis_connector: Any) -> None:
    # MGET returns nil for values stored as lists of chunks: get_batch returned None.
    from tether.connectors.redis import RedisConnector

    connector = RedisConnector.from_config({**redis_connector.config(), 'chunk_size': 1024})
    try:
        big, small = b'x' * 5000, b'y'
        keys = connector.put_batch([big, small])
        missing = connector.new_key()
        assert connector.get_batch([*keys, missing]) == [big, small, None]
        assert connector.get(keys[0]) == big
    finally:
        connector.close()
