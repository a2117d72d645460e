"""Raw redis-py side of the batch throughput benchmark: pipelined SET/GET of the bytes.

What the same bytes cost through Redis with no proxy, no serializer and no store: the
producer pipelines ``SET`` of a batch and sends the keys, the consumer pipelines ``GET``.
The bound a store over Redis can approach (loaded by ``_harness.py`` in tether's venv).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from typing import Any

import redis

LIBRARY = 'redis-py'
REDIS = ('127.0.0.1', int(os.environ.get('BENCH_REDIS_PORT', '6379')))
_CLIENT: list[Any] = []


def version() -> str:
    return str(redis.__version__)


def _client() -> Any:
    if not _CLIENT:
        _CLIENT.append(redis.Redis(*REDIS))
    return _CLIENT[0]


def make_store(connector: str, tag: str, typical: bool = False) -> Any:
    assert connector == 'redis'
    return (_client(), f'raw-{tag}:')


def close_store(store: Any, clear: bool = True) -> None:
    pass


def proxy(store: Any, obj: Any) -> Any:
    return proxy_batch(store, [obj])[0]


def proxy_batch(store: Any, objs: Sequence[Any]) -> list[Any]:
    client, prefix = store
    keys = [f'{prefix}{uuid.uuid4().hex}' for _ in objs]
    pipe = client.pipeline(transaction=False)
    for key, obj in zip(keys, objs, strict=True):
        pipe.set(key, obj)
    pipe.execute()
    return keys


def resolve(key: Any) -> Any:
    return _client().get(key)


def resolve_batch(keys: Sequence[Any]) -> list[Any]:
    pipe = _client().pipeline(transaction=False)
    for key in keys:
        pipe.get(key)
    return list(pipe.execute())


def evict(store: Any, key: Any) -> None:
    store[0].delete(key)


def evict_many(store: Any, keys: Sequence[Any]) -> None:
    if keys:
        store[0].delete(*keys)


__all__ = [
    'LIBRARY',
    'close_store',
    'evict',
    'evict_many',
    'make_store',
    'proxy',
    'proxy_batch',
    'resolve',
    'resolve_batch',
    'version',
]
