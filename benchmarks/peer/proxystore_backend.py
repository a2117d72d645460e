"""Peer side of the benchmarks: the published ``proxystore`` package.

Runs only under the peer venv's python (``benchmarks/peer_env.sh``); tether never
imports this file. Mirrors ``benchmarks/_tether_backend.py`` function for function.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from typing import Any

from proxystore.proxy import extract, is_resolved
from proxystore.serialize import deserialize, serialize
from proxystore.store import Store
from proxystore.store.utils import get_key

LIBRARY = 'proxystore'
# The drivers start a private redis-server and pass its port (see _common.redis_server).
REDIS = ('127.0.0.1', int(os.environ.get('BENCH_REDIS_PORT', '6379')))


def version() -> str:
    from importlib.metadata import version as v

    return v('proxystore')


def connector_label(connector: str) -> str:
    return {
        'redis': f'RedisConnector (127.0.0.1:{REDIS[1]})',
        'file': f'FileConnector ({tempfile.gettempdir()})',
        # proxystore has no shared-memory connector: its closest single-node option is
        # a FileConnector on the tmpfs /dev/shm.
        'shm': 'FileConnector on /dev/shm (no shared-memory connector)',
    }[connector]


def make_store(connector: str, tag: str, typical: bool = False) -> Any:
    name = 'bench' if typical else f'b-{tag}'
    if connector == 'redis':
        from proxystore.connectors.redis import RedisConnector

        # clear=False: proxystore's clear flushes the whole (shared) database.
        conn: Any = RedisConnector(*REDIS, clear=False)
    elif connector in ('file', 'shm'):
        from proxystore.connectors.file import FileConnector

        base = tempfile.gettempdir() if connector == 'file' else '/dev/shm'
        conn = FileConnector(os.path.join(base, f'proxystore-bench-{tag}'), clear=True)
    else:
        raise ValueError(connector)
    # BENCH_CACHE_SIZE: the stores' LRU cache size (default 16, the libraries' default).
    cache_size = int(os.environ.get('BENCH_CACHE_SIZE', '16'))
    return Store(name, conn, cache_size=cache_size, register=True)


def close_store(store: Any, clear: bool = True) -> None:
    # Redis: the connector was made with clear=False (proxystore's clear flushes the whole
    # database); the keys are evicted one by one by the benchmark. Files: clear=True
    # removes the benchmark's own directory.
    store.close()


def proxy(store: Any, obj: Any) -> Any:
    return store.proxy(obj)


def evict(store: Any, p: Any) -> None:
    store.evict(get_key(p))


def evict_many(store: Any, proxies: Sequence[Any]) -> None:
    for p in proxies:
        evict(store, p)


def resolve(p: Any) -> Any:
    return extract(p)


def proxy_batch(store: Any, objs: Sequence[Any]) -> list[Any]:
    return list(store.proxy_batch(objs))


def resolve_batch(proxies: Sequence[Any]) -> list[Any]:
    # ProxyStore 1.1 has no batch resolution: its best public way is one by one.
    return [extract(p) for p in proxies]


__all__ = [
    'LIBRARY',
    'close_store',
    'connector_label',
    'deserialize',
    'evict',
    'evict_many',
    'is_resolved',
    'make_store',
    'proxy',
    'proxy_batch',
    'resolve',
    'resolve_batch',
    'serialize',
    'version',
]
