"""Distributed futures: set/result/done/proxy, blocking, timeouts, engines, cross-engine."""

from __future__ import annotations

import multiprocessing
import pickle
import threading
import time
from typing import Any

import pytest

from tether.exceptions import (
    FutureAlreadySetError,
    FutureTimeoutError,
    StoreError,
)
from tether.proxy import Proxy, is_resolved
from tether.store import Store
from tether.store.future import Future
from tether.testing import RedisServer, redis_server_fixture

from . import _tasks


def test_set_result_then_result_and_done(store: Store[Any]) -> None:
    future: Future[list[int]] = store.future()
    assert not future.done()
    future.set_result([1, 2, 3])
    assert future.done()
    assert future.result() == [1, 2, 3]
    assert future.proxy() == [1, 2, 3]


def test_setting_twice_raises(store: Store[Any]) -> None:
    future = store.future()
    future.set_result('a')
    with pytest.raises(FutureAlreadySetError, match='already has a result'):
        future.set_result('b')
    assert future.result() == 'a'


def test_result_timeout_is_a_clear_error(store: Store[Any]) -> None:
    future = store.future()
    start = time.monotonic()
    with pytest.raises(FutureTimeoutError, match=store.name) as info:
        future.result(timeout=0.3)
    assert time.monotonic() - start >= 0.3
    assert isinstance(info.value, TimeoutError)
    assert 'producer may have died' in str(info.value)


def test_proxy_blocks_until_result_is_set(store: Store[Any]) -> None:
    future = store.future()
    proxy = future.proxy()
    assert not is_resolved(proxy)
    setter = threading.Timer(0.3, future.set_result, args=('value',))
    setter.start()
    start = time.monotonic()
    assert proxy == 'value'
    assert time.monotonic() - start >= 0.25
    setter.join()


def test_proxy_timeout_raises_through_the_proxy(store: Store[Any]) -> None:
    future = store.future(timeout=0.2)
    # tether's own errors keep their type through a proxy, with a note naming the factory.
    with pytest.raises(FutureTimeoutError) as info:
        str(future.proxy())
    assert any('FutureFactory' in note for note in info.value.__notes__)


def test_future_and_proxy_pickle_small(store: Store[Any]) -> None:
    future = store.future()
    data = pickle.dumps(future)
    proxy_data = pickle.dumps(future.proxy())
    assert len(data) < 1024
    assert len(proxy_data) < 1024
    copy = pickle.loads(data)
    copy.set_result(42)
    assert future.result() == 42
    assert pickle.loads(proxy_data) == 42


def test_evict_future_removes_result_on_first_resolve(
    store: Store[Any],
    keys: Any,
) -> None:
    future = store.future(evict=True)
    future.set_result('x')
    assert future.proxy() == 'x'
    assert keys() == 0


def test_non_deferrable_connector_is_refused() -> None:
    class Plain:
        # The bytes-level core of a connector, without new_key/set.
        def put(self, data: bytes) -> Any:
            raise AssertionError('not called')

        get = exists = evict = put

        def close(self) -> None:
            pass

    s: Store[Any] = Store('plain-future', Plain())  # type: ignore[type-var]
    with pytest.raises(StoreError, match='cannot back futures'):
        s.future()


def test_file_connector_polls_with_backoff(tmp_path: Any) -> None:
    from tether.connectors.file import FileConnector

    with Store('file-future', FileConnector(str(tmp_path))) as s:
        if not hasattr(s.connector, 'new_key'):
            pytest.fail('FileConnector is expected to be deferrable')
        future = s.future(poll_interval=0.001, poll_max=0.05)
        assert not hasattr(s.connector, 'wait')
        setter = threading.Timer(0.2, future.set_result, args=([7],))
        setter.start()
        assert future.result(timeout=5) == [7]
        setter.join(10)


# A Redis server of our own (its command counters are ours alone).
private_redis = redis_server_fixture()


def test_waiting_does_not_hammer_redis(private_redis: RedisServer) -> None:
    import redis

    from tether.connectors.redis import RedisConnector

    client = redis.Redis(private_redis.host, private_redis.port)
    with Store('quiet', RedisConnector(private_redis.host, private_redis.port)) as s:
        future = s.future()
        client.config_resetstat()
        setter = threading.Timer(1.5, future.set_result, args=('done',))
        setter.start()
        assert future.result(timeout=10) == 'done'
        # The waiter wakes on the setter's LPUSH, before the setter has its reply: let it
        # finish before the server stops.
        setter.join(10)
        stats = client.info('commandstats')
    calls = sum(v['calls'] for v in stats.values())
    # A polling loop at 1 ms would issue hundreds of commands in 1.5 s.
    assert calls < 20, stats
    client.close()


def test_consumer_started_before_producer(store: Store[Any], process_pool: Any) -> None:
    future = store.future(timeout=30)
    started = store.future(timeout=30)
    consumer = process_pool.submit(_tasks.consume, future.proxy(), started)
    consumer_started = started.result()  # the consumer runs, and waits for the value
    assert not consumer.done()
    producer = process_pool.submit(_tasks.set_later, future, [1, 2, 3])
    value, arrived = consumer.result(timeout=60)
    assert value == [1, 2, 3]
    assert arrived >= consumer_started
    producer.result(timeout=60)


def test_producer_dies_consumer_times_out(store: Store[Any]) -> None:
    future = store.future()
    ctx = multiprocessing.get_context('spawn')
    producer = ctx.Process(target=_tasks.sleep_forever_then_set, args=(future,))
    producer.start()
    producer.kill()
    producer.join(timeout=10)
    with pytest.raises(FutureTimeoutError, match='producer may have died'):
        future.result(timeout=0.5)
    assert not future.done()


@pytest.mark.parametrize(
    ('target_class', 'value'),
    [(None, 'value'), (str, 'value'), (list, ['value'])],
)
def test_dask_tasks_seed_figure_4_4(
    store: Store[Any], dask_client: Any, target_class: type | None, value: Any
) -> None:
    future = store.future(timeout=60)
    # Any class hint, a container too: Dask's code is told the proxy is a Proxy (it
    # does not walk it), so nothing resolves or waits at submission.
    proxy = future.proxy(target_class=target_class)
    # The consumer is submitted first; submitting it must not wait for the result.
    started = store.future(timeout=60)
    t2 = dask_client.submit(_tasks.consume, proxy, started)
    assert not is_resolved(proxy)
    t1 = dask_client.submit(_tasks.set_later, future, value, started)
    assert t2.result(timeout=60)[0] == value
    t1.result(timeout=60)


def test_future_crosses_engines_dask_to_parsl(
    store: Store[Any],
    dask_client: Any,
    parsl_pool: Any,
) -> None:
    future = store.future(timeout=60)
    # Engines inspect arguments at submission (isinstance): they are told the proxy is
    # a Proxy, so it stays unresolved there, with or without a class hint.
    proxy = future.proxy(target_class=str)
    consumer = parsl_pool.submit(_tasks.consume, proxy)
    waiter = parsl_pool.submit(_tasks.wait_result, future, 60)
    assert not is_resolved(proxy)
    producer = dask_client.submit(_tasks.set_later, future, 'crossed')
    assert consumer.result(timeout=90)[0] == 'crossed'
    assert waiter.result(timeout=90) == 'crossed'
    assert isinstance(producer.result(timeout=60), int)


def test_proxy_of_future_is_a_proxy(store: Store[Any]) -> None:
    future = store.future()
    proxy = future.proxy()
    assert isinstance(proxy, Proxy)
    future.set_result({'a': 1})
    assert isinstance(proxy, dict)
    assert proxy['a'] == 1


def test_polling_wait_is_measured_on_the_clock(tmp_path: Any) -> None:
    # A connector that cannot block in its server is polled: the backoff sleeps and the
    # timeout are read on the future's clock, so a fake clock drives them.
    from tether.connectors.file import FileConnector
    from tether.testing import FakeClock

    clock = FakeClock()
    with Store('future-clock', FileConnector(str(tmp_path)), register=False) as store:
        future: Future[int] = store.future(timeout=60, clock=clock)
        errors: list[BaseException] = []

        def wait() -> None:
            try:
                future.result()
            except BaseException as e:  # the assertion reads it
                errors.append(e)

        waiter = threading.Thread(target=wait)
        waiter.start()
        clock.wait_for_sleepers(1)
        assert waiter.is_alive()
        clock.advance(60)
        waiter.join(30)
        assert not waiter.is_alive()
        assert len(errors) == 1
        assert isinstance(errors[0], FutureTimeoutError)
