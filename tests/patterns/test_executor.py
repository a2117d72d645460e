"""StoreExecutor over real engines: policies, ownership, nesting, map/shutdown, no leaks."""

from __future__ import annotations

import concurrent.futures
import gc
import pickle
import time
from typing import Any

import pytest

from tether.proxy import Proxy, is_resolved
from tether.store import Store
from tether.store.executor import ProxyAlways, ProxyNever, ProxySize, ProxyType, StoreExecutor
from tether.store.ref import OwnedProxy
from tether.testing import wait_until

from . import _tasks


def _wait_for(predicate: Any) -> None:
    """Wait until ``predicate`` holds, collecting garbage (dropped proxies) in between."""
    wait_until(lambda: gc.collect() >= 0 and predicate(), timeout=30, message='the keys count')


def test_policies() -> None:
    assert ProxyAlways()(1)
    assert not ProxyNever()([1])
    assert ProxyType(list, dict)([1])
    assert not ProxyType(list)(6)
    size = ProxySize(100)
    assert size(b'x' * 100)
    assert not size(b'x' * 99)
    big, parts = size.measure(list(range(1000)))
    assert big
    assert parts is not None  # serialized once, handed over to be stored as they are
    small, parts = size.measure([1])
    assert not small
    assert parts is None
    big, parts = size.measure('y' * 1000)
    assert big
    assert parts is None  # measured without serializing


def test_size_policy_serializes_once(store: Store[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    import tether.store._store as store_mod
    import tether.store.executor as executor_mod

    calls = {'n': 0}
    real = executor_mod.serialize_parts

    def counting(obj: Any) -> Any:
        calls['n'] += 1
        return real(obj)

    monkeypatch.setattr(executor_mod, 'serialize_parts', counting)
    monkeypatch.setattr(store_mod, 'serialize_parts', counting)
    with StoreExecutor(
        concurrent.futures.ThreadPoolExecutor(1),
        store,
        should_proxy=ProxySize(1000),
        close_store=False,
        proxy_results=False,
    ) as executor:
        assert executor.submit(len, list(range(1000))).result() == 1000
    assert calls['n'] == 1


def test_seed_figure_4_8_process_pool(store: Store[Any], keys: Any) -> None:
    with StoreExecutor(
        concurrent.futures.ProcessPoolExecutor(2),
        store=store,
        ownership=True,
        # The seed's ProxyType(list) would not proxy the int result it asserts is a proxy.
        should_proxy=ProxyType(list, int),
        close_store=False,
    ) as executor:
        future = executor.submit(sum, [1, 2, 3])
        result = future.result()
        assert isinstance(result, Proxy)
        assert isinstance(result, OwnedProxy)
        assert result == 6
        _wait_for(lambda: keys() == 1)
        assert keys() == 1  # the argument is gone, the result is owned here
        del result, future
        gc.collect()
    assert keys() == 0


def test_without_ownership_nothing_leaks(store: Store[Any], keys: Any, process_pool: Any) -> None:
    executor = StoreExecutor(
        process_pool,
        store,
        should_proxy=ProxyType(bytes),
        ownership=False,
        close_store=False,
        close_executor=False,
    )
    futures = [executor.submit(_tasks.make_bytes, 10) for _ in range(3)]
    results = [f.result(timeout=60) for f in futures]
    assert all(isinstance(r, Proxy) and r == b'x' * 10 for r in results)
    assert executor.submit(_tasks.length, b'abc').result(timeout=60) == 3
    _wait_for(lambda: keys() == 3)
    assert keys() == 3  # results live until shutdown; the argument is gone
    executor.shutdown()
    assert keys() == 0
    assert not process_pool._shutdown_thread  # the wrapped pool was left running


def test_nested_arguments_and_results(store: Store[Any], keys: Any) -> None:
    with StoreExecutor(
        concurrent.futures.ThreadPoolExecutor(2),
        store,
        should_proxy=ProxyType(bytes),
        proxy_nested=True,
        close_store=False,
    ) as executor:
        seen = executor.submit(
            lambda xs, d: [x.__class__.__name__ for x in (*xs, d['k'])],
            [b'a', 1],
            {'k': b'b'},
        ).result()
        assert seen == ['bytes', 'int', 'bytes']
        result = executor.submit(lambda: (b'c', 2)).result()
        assert isinstance(result, tuple)
        assert isinstance(result[0], Proxy)
        assert result[1] == 2
        del result
        gc.collect()
    assert keys() == 0


def test_map_and_shutdown_follow_the_standard_library(store: Store[Any]) -> None:
    executor = StoreExecutor(
        concurrent.futures.ThreadPoolExecutor(2),
        store,
        should_proxy=ProxyAlways(),
        close_store=False,
    )
    assert list(executor.map(len, [[1], [1, 2], [1, 2, 3]])) == [1, 2, 3]
    with pytest.raises(concurrent.futures.TimeoutError):
        list(executor.map(time.sleep, [2], timeout=0.1))
    executor.shutdown(wait=True)
    with pytest.raises(RuntimeError, match='after shutdown'):
        executor.submit(len, [1])
    executor.shutdown()


def test_arguments_are_not_resolved_by_the_executor(store: Store[Any]) -> None:
    proxy = store.proxy([1, 2], populate_target=False)
    with StoreExecutor(
        concurrent.futures.ThreadPoolExecutor(1),
        store,
        should_proxy=ProxyAlways(),
        close_store=False,
    ) as executor:
        future = executor.submit(lambda p: p, proxy)
        assert future.result() is proxy
        assert not is_resolved(proxy)
    store.evict(proxy.__proxy_factory__.key)


def test_dask_client(store: Store[Any], keys: Any, dask_client: Any) -> None:
    executor = StoreExecutor(
        dask_client,
        store,
        should_proxy=ProxySize(1000),
        close_store=False,
        close_executor=False,
    )
    assert executor.submit(_tasks.length, b'x' * 5000).result() == 5000
    result = executor.submit(_tasks.make_bytes, 5000).result()
    assert isinstance(result, OwnedProxy)
    assert len(result) == 5000
    assert list(executor.map(_tasks.length, [b'x' * 2000, b'y'])) == [2000, 1]
    del result
    executor.shutdown()
    _wait_for(lambda: keys() == 0)
    assert keys() == 0


def test_parsl(store: Store[Any], keys: Any, parsl_pool: Any) -> None:
    executor = StoreExecutor(
        parsl_pool,
        store,
        should_proxy=ProxySize(1000),
        close_store=False,
        close_executor=False,
    )
    assert executor.submit(_tasks.type_name, b'x' * 5000).result(timeout=60) == 'bytes'
    result = executor.submit(_tasks.make_list, 1000).result(timeout=60)
    assert isinstance(result, OwnedProxy)
    assert sum(result) == 499500
    del result
    executor.shutdown()
    _wait_for(lambda: keys() == 0)
    assert keys() == 0


def test_store_executor_is_an_executor(store: Store[Any]) -> None:
    executor = StoreExecutor(concurrent.futures.ThreadPoolExecutor(1), store, close_store=False)
    assert isinstance(executor, concurrent.futures.Executor)
    assert 'StoreExecutor' in repr(executor)
    executor.shutdown()
    assert pickle.dumps(ProxySize(5))
