"""Pooled sockets across fork, forkserver and spawn, and replies matched to requests.

The parent uses a registered store first (so its connector holds pooled sockets), then
a process pool (two processes of eight threads) resolves many proxies at once. A forked
child that reused the parent's socket would read replies meant for another process: a
proxy would resolve to another request's object. Every reply must answer its own
request, or raise.
"""

from __future__ import annotations

import multiprocessing
import uuid
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.security._node import RunningNode, StartNode, start_node
from tether.connectors.redis import RedisConnector
from tether.store import Store, register_store, unregister_store

__all__ = ['start_node']

N_OBJECTS = 64
N_THREADS = 8


def _value(i: int) -> bytes:
    return f'object {i} '.encode() * (1 + i % 50)


def _resolve_all(proxies: list[Any]) -> list[tuple[int, bool]]:
    """In a worker: resolve every proxy from many threads at once; report mismatches."""

    def one(item: tuple[int, Any]) -> tuple[int, bool]:
        i, proxy = item
        return i, bytes(proxy) == _value(i)

    with ThreadPoolExecutor(N_THREADS) as pool:
        return list(pool.map(one, enumerate(proxies)))


def _check(store: Store[Any], method: str) -> None:
    proxies = [store.proxy(_value(i)) for i in range(N_OBJECTS)]
    # The parent uses the store: its pool now holds open, used sockets.
    assert bytes(store.proxy(b'parent')) == b'parent'
    assert store.get(store.put(b'again')) == b'again'
    context = multiprocessing.get_context(method)
    with ProcessPoolExecutor(2, mp_context=context) as pool:
        results = [f.result() for f in [pool.submit(_resolve_all, proxies) for _ in range(8)]]
    for result in results:
        assert result == [(i, True) for i in range(N_OBJECTS)]
    # And the parent's own pool still works after its children used theirs.
    assert bytes(store.proxy(b'after')) == b'after'


@pytest.fixture
def node_store(start_node: StartNode, tmp_path: Path) -> Iterator[Store[Any]]:
    node: RunningNode = start_node()
    # The secret never travels in a proxy: the workers read it from the file the config
    # names (a spawned or forkserver worker does not inherit this process's memory).
    secret_file = tmp_path / 'node.secret'
    secret_file.write_text(node.secret + '\n')
    connector = node.connector(secret_file=str(secret_file))
    store: Store[Any] = Store(f'fork-{uuid.uuid4().hex[:8]}', connector, cache_size=0)
    register_store(store)
    yield store
    unregister_store(store)
    store.close()


@pytest.fixture
def redis_store() -> Iterator[Store[Any]]:
    prefix = f'test-fork-{uuid.uuid4().hex}:'
    connector = RedisConnector(prefix=prefix)
    store: Store[Any] = Store(f'fork-{uuid.uuid4().hex[:8]}', connector, cache_size=0)
    register_store(store)
    yield store
    unregister_store(store)
    client = connector.client
    for key in client.scan_iter(match=f'{prefix}*'):
        client.delete(key)
    store.close()


METHODS = ['fork', 'forkserver', 'spawn']


@pytest.mark.parametrize('method', METHODS)
def test_node_connector_in_process_pools(node_store: Store[Any], method: str) -> None:
    _check(node_store, method)


@pytest.mark.parametrize('method', METHODS)
def test_redis_connector_in_process_pools(redis_store: Store[Any], method: str) -> None:
    _check(redis_store, method)
