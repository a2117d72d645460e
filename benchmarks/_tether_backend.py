"""tether side of the benchmarks (loaded by ``_harness.py`` in tether's own venv)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from typing import Any

from tether.proxy import extract, get_factory, is_resolved
from tether.serialize import deserialize, serialize, serialize_parts
from tether.store import Store

LIBRARY = 'tether'
# The drivers start a private redis-server and pass its port (see _common.redis_server).
REDIS = ('127.0.0.1', int(os.environ.get('BENCH_REDIS_PORT', '6379')))


def version() -> str:
    from importlib.metadata import version as v

    return v('tether')


def connector_label(connector: str) -> str:
    return {
        'redis': f'RedisConnector (127.0.0.1:{REDIS[1]})',
        'file': f'FileConnector ({tempfile.gettempdir()})',
        'shm': 'SharedMemoryConnector (/dev/shm)',
    }[connector]


def make_store(connector: str, tag: str, typical: bool = False) -> Store[Any]:
    name = 'bench' if typical else f'b-{tag}'
    conn: Any
    if connector == 'redis':
        from tether.connectors.redis import RedisConnector

        # typical: the default key prefix ('tether:'); keys are uuids, evicted at once.
        conn = RedisConnector(*REDIS, prefix='tether:' if typical else f'tb-{tag}:')
    elif connector == 'file':
        from tether.connectors.file import FileConnector

        conn = FileConnector(os.path.join(tempfile.gettempdir(), f'tether-bench-{tag}'))
    elif connector == 'shm':
        from tether.connectors.shared_memory import SharedMemoryConnector

        conn = SharedMemoryConnector(namespace=f'bench{tag.replace("-", "")}')
    else:
        raise ValueError(connector)
    # BENCH_CACHE_SIZE: the stores' LRU cache size (default 16, the libraries' default).
    cache_size = int(os.environ.get('BENCH_CACHE_SIZE', '16'))
    return Store(name, conn, cache_size=cache_size, register=True)


def close_store(store: Store[Any], clear: bool = True) -> None:
    # tether's clear removes only this store's key prefix / directory / namespace; never
    # clear a store using the shared default prefix.
    store.close(clear=clear)


def proxy(store: Store[Any], obj: Any) -> Any:
    return store.proxy(obj)


def evict(store: Store[Any], p: Any) -> None:
    store.evict(get_factory(p).key)  # type: ignore[attr-defined]


def evict_many(store: Store[Any], proxies: Sequence[Any]) -> None:
    for p in proxies:
        evict(store, p)


def serialize_transport(obj: Any) -> Any:
    """What a store does: serialize to parts (no copy), which the connector copies into
    the channel; the reader gets a writable buffer and deserializes it without a copy.
    Here the channel is one buffer: one copy of the data in all."""
    import numpy as np

    parts = [memoryview(p).cast('B') for p in serialize_parts(obj)]
    buf = np.empty(sum(p.nbytes for p in parts), dtype=np.uint8)
    view = memoryview(buf)
    offset = 0
    for part in parts:
        view[offset : offset + part.nbytes] = part
        offset += part.nbytes
    return deserialize(view)


def resolve(p: Any) -> Any:
    return extract(p)


def proxy_batch(store: Store[Any], objs: Sequence[Any]) -> list[Any]:
    return store.proxy_batch(objs)


def resolve_batch(proxies: Sequence[Any]) -> list[Any]:
    from tether.store.batch import resolve_batch as resolve_all

    resolve_all(proxies)  # one round trip per store
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
    'serialize_transport',
    'version',
]
