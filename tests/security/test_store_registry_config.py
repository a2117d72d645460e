"""Issue 8 item 7: a proxy resolves through a store with its own config, never by name only.

Two stores with one name and different connectors (every pattern page of the docs names
its store 'example') must not make a proxy of one resolve against the other's connector.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from tests.conftest import REDIS_HOST, REDIS_PORT
from tether.connectors.file import FileConnector
from tether.connectors.redis import RedisConnector
from tether.store import Store, get_or_create_store, get_store


def test_same_name_other_connector(tmp_path: Path, redis_connector: Any) -> None:
    with (
        Store('example', FileConnector(tmp_path / 'files'), register=True) as files,
        Store('example', redis_connector) as redis_store,
    ):
        p = redis_store.proxy({'from': 'redis'}, populate_target=False)
        received = pickle.loads(pickle.dumps(p))  # another process: no link to the store
        assert received == {'from': 'redis'}
        # The registered store keeps the name and its own proxies still resolve.
        assert get_store('example') is files
        q = pickle.loads(pickle.dumps(files.proxy([1], populate_target=False)))
        assert q == [1]
        assert get_store(received) is not files


def test_same_name_other_prefix(redis_client: Any, unique_prefix: str) -> None:
    a = RedisConnector(REDIS_HOST, REDIS_PORT, prefix=unique_prefix + 'a:')
    b = RedisConnector(REDIS_HOST, REDIS_PORT, prefix=unique_prefix + 'b:')
    try:
        with Store('example', a, register=True) as sa, Store('example', b) as sb:
            pa = pickle.loads(pickle.dumps(sa.proxy('in a', populate_target=False)))
            pb = pickle.loads(pickle.dumps(sb.proxy('in b', populate_target=False)))
            assert pb == 'in b'
            assert pa == 'in a'
            built = get_or_create_store(sb.config())
            assert built is not sa
            assert built.connector.prefix == unique_prefix + 'b:'
            assert get_or_create_store(sb.config()) is built
            assert get_or_create_store(sa.config()) is sa
    finally:
        for key in redis_client.scan_iter(match=f'{unique_prefix}*'):
            redis_client.delete(key)


def test_difference_is_described(tmp_path: Path, redis_connector: Any) -> None:
    from tether.store._registry import _describe_difference

    with (
        Store('example', FileConnector(tmp_path)) as f,
        Store('example', redis_connector) as r,
    ):
        text = _describe_difference(f.config(), r.config())
        assert 'connector_type' in text
        assert 'FileConnector' in text
        assert 'RedisConnector' in text
