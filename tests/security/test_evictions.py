"""Issue 8 item 10: evictions that do not happen or are undone.

* ``Store.get`` must not put into the cache what it read before a concurrent ``evict``;
* ``StoreExecutor.shutdown(wait=False)`` must not leave the running tasks' objects behind;
* a lifetime that ends after its store was closed must say so, not leave objects silently;
* with ``StoreExecutor(ownership=True)``, a task that returns its argument (or a result
  containing it) hands back a usable result.
"""

from __future__ import annotations

import concurrent.futures
import gc
import pickle
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import REDIS_HOST, REDIS_PORT, count_keys
from tether.connectors.local import LocalConnector
from tether.connectors.redis import RedisConnector
from tether.exceptions import LifetimeError
from tether.proxy import Proxy
from tether.store import Store
from tether.store.executor import ProxyAlways, ProxyType, StoreExecutor
from tether.store.lifetimes import ContextLifetime, LeaseLifetime
from tether.store.ref import OwnedProxy


class _EvictDuringGet(LocalConnector):
    """A local connector that lets a test run code between reading and returning."""

    hook: Any = None

    def get(self, key: Any) -> Any:
        data = super().get(key)
        if self.hook is not None:
            hook, self.hook = self.hook, None
            hook()
        return data


def test_get_does_not_recache_after_a_concurrent_evict() -> None:
    connector = _EvictDuringGet()
    with Store('evict-race', connector) as store:
        key = store.put('value')
        connector.hook = lambda: store.evict(key)
        assert store.get(key) == 'value'  # read before the evict
        assert not connector.exists(key)
        assert not store.exists(key)
        assert store.get(key) is None


@pytest.fixture
def redis_store(redis_client: Any, unique_prefix: str) -> Iterator[Store[Any]]:
    store = Store('evictions', RedisConnector(REDIS_HOST, REDIS_PORT, prefix=unique_prefix))
    yield store
    if not store.closed:
        store.close()
    for key in redis_client.scan_iter(match=f'{unique_prefix}*'):
        redis_client.delete(key)


def _wait_for(event: threading.Event, data: Any) -> int:
    event.wait()
    return len(data)


@pytest.mark.parametrize('ownership', [True, False])
def test_shutdown_without_wait_leaves_nothing(
    redis_store: Store[Any], redis_client: Any, unique_prefix: str, ownership: bool
) -> None:
    release = threading.Event()
    pool = concurrent.futures.ThreadPoolExecutor(2)
    executor = StoreExecutor(pool, redis_store, ProxyType(list), ownership=ownership)
    futures = [executor.submit(_wait_for, release, [i] * 10) for i in range(3)]
    executor.shutdown(wait=False)
    assert count_keys(redis_client, unique_prefix) > 0
    release.set()
    assert [f.result() for f in futures] == [10, 10, 10]
    pool.shutdown(wait=True)
    # Results are owned by the caller (ownership) or by the executor until it closes.
    del futures
    gc.collect()
    assert count_keys(redis_client, unique_prefix) == 0
    assert redis_store.closed


def test_lifetime_ending_after_its_store_closed_is_not_silent(redis_store: Store[Any]) -> None:
    lifetime = ContextLifetime(redis_store)
    key = redis_store.put('kept', lifetime=lifetime)
    redis_store.close()
    with pytest.raises(LifetimeError, match='could not be evicted'):
        lifetime.close()
    assert key is not None


def test_lease_ending_after_its_store_closed_is_logged(
    redis_store: Store[Any], caplog: pytest.LogCaptureFixture
) -> None:
    lease = LeaseLifetime(redis_store, expiry=3600)
    redis_store.put('kept', lifetime=lease)
    redis_store.close()
    with pytest.raises(LifetimeError):
        lease.close()
    assert any('could not be evicted' in r.getMessage() for r in caplog.records)


def _identity(x: Any) -> Any:
    return x


def _in_a_tuple(x: Any) -> Any:
    return (x, 1)


@pytest.mark.parametrize('task', [_identity, _in_a_tuple])
@pytest.mark.parametrize('pool_kind', ['thread', 'process'])
def test_task_returning_its_argument(
    redis_store: Store[Any],
    redis_client: Any,
    unique_prefix: str,
    task: Any,
    pool_kind: str,
) -> None:
    pool: concurrent.futures.Executor = (
        concurrent.futures.ThreadPoolExecutor(1)
        if pool_kind == 'thread'
        else concurrent.futures.ProcessPoolExecutor(1)
    )
    with StoreExecutor(pool, redis_store, ProxyAlways(), ownership=True) as executor:
        result = executor.submit(task, [1, 2, 3]).result()
        value = result if task is _identity else result[0]
        assert isinstance(value, Proxy)
        assert type(value) is OwnedProxy
        assert value == [1, 2, 3]
        del result, value
        gc.collect()
    assert count_keys(redis_client, unique_prefix) == 0


@pytest.mark.parametrize('pool_kind', ['thread', 'process'])
def test_task_returning_its_argument_without_ownership(
    redis_store: Store[Any],
    redis_client: Any,
    unique_prefix: str,
    pool_kind: str,
) -> None:
    pool: concurrent.futures.Executor = (
        concurrent.futures.ThreadPoolExecutor(1)
        if pool_kind == 'thread'
        else concurrent.futures.ProcessPoolExecutor(1)
    )
    with StoreExecutor(pool, redis_store, ProxyType(list), ownership=False) as executor:
        result = executor.submit(_identity, [1, 2, 3]).result()
        assert isinstance(result, Proxy)
        # A fresh copy reads from the store: the object must still be there.
        assert pickle.loads(pickle.dumps(result)) == [1, 2, 3]
    assert count_keys(redis_client, unique_prefix) == 0
