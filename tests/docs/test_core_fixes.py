"""Regression tests for bugs in the core found while writing the docs."""

from __future__ import annotations

import pathlib
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


def test_mypy_plugin_checks_proxy_attributes(tmp_path: pathlib.Path) -> None:
    # The plugin passed msg= to analyze_member_access, which current mypy no longer
    # takes: mypy crashed with an INTERNAL ERROR on any attribute of a Proxy.
    from mypy import api

    (tmp_path / 'mypy.ini').write_text(
        '[mypy]\nplugins = tether.mypy_plugin\nfollow_imports = silent\n',
    )
    snippet = tmp_path / 'snippet.py'
    snippet.write_text(
        'from tether.proxy import Proxy\n\n\n'
        'def f(p: Proxy[list[int]]) -> None:\n'
        '    p.append(1)\n'
        '    p.no_such_method()\n',
    )
    out, err, status = api.run(
        [
            '--config-file',
            str(tmp_path / 'mypy.ini'),
            '--cache-dir',
            str(tmp_path / 'cache'),
            str(snippet),
        ],
    )
    assert 'INTERNAL ERROR' not in out + err
    assert status == 1, out + err
    assert 'snippet.py:6: error: "list[int]" has no attribute "no_such_method"' in out
    assert 'snippet.py:5' not in out
