"""Store-level names and keywords a ProxyStore program uses."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tether.connectors.local import LocalConnector
from tether.exceptions import (
    InvalidArgumentError,
    NonProxiableTypeError,
    ProxyResolveMissingKeyError,
    StoreExistsError,
)
from tether.proxy import Proxy, ProxyLocker, is_resolved
from tether.store import Store, get_store, register_store, store_registration
from tether.store.factory import PollingStoreFactory
from tether.store.lifetimes import ContextLifetime
from tether.store.ref import OwnedProxy, into_owned
from tether.store.utils import get_key


@pytest.fixture
def store() -> Iterator[Store[LocalConnector]]:
    with Store('porting-store', LocalConnector(), metrics=True) as s:
        yield s


def test_is_cached(store: Store[Any]) -> None:
    key = store.put([1, 2])
    assert not store.is_cached(key)
    store.get(key)
    assert store.is_cached(key)
    store.evict(key)
    assert not store.is_cached(key)


def test_locked_proxy(store: Store[Any]) -> None:
    locker = store.locked_proxy([1, 2], populate_target=False)
    assert isinstance(locker, ProxyLocker)
    p = locker.unlock()
    assert not is_resolved(p)
    assert p == [1, 2]
    assert store.locked_proxy(None) is None
    with pytest.raises(NonProxiableTypeError):
        store.locked_proxy(None, skip_nonproxiable=False)


def test_store_registration_registers_for_the_block() -> None:
    a = Store('porting-a', LocalConnector())
    b = Store('porting-b', LocalConnector())
    with store_registration(a, b):
        assert get_store('porting-a') is a
        assert get_store('porting-b') is b
    assert get_store('porting-a') is None
    assert get_store('porting-b') is None


def test_store_registration_refuses_a_taken_name_and_undoes() -> None:
    a = Store('porting-a', LocalConnector())
    taken = Store('porting-b', LocalConnector(), register=True)
    other = Store('porting-b', LocalConnector())
    with pytest.raises(StoreExistsError), store_registration(a, other):
        pass
    assert get_store('porting-a') is None
    assert get_store('porting-b') is taken
    with store_registration(other, exist_ok=True):
        assert get_store('porting-b') is other


def test_registering_the_same_store_twice_raises() -> None:
    s = Store('porting-twice', LocalConnector(), register=True)
    with pytest.raises(StoreExistsError):
        register_store(s)
    register_store(s, exist_ok=True)


def test_put_batch_lifetime(store: Store[Any]) -> None:
    with ContextLifetime(store) as lifetime:
        keys = store.put_batch([1, 2, 3], lifetime=lifetime)
        assert all(store.exists(k) for k in keys)
    assert not any(store.exists(k) for k in keys)


def test_proxy_from_key_lifetime(store: Store[Any]) -> None:
    key = store.put('x')
    with ContextLifetime(store) as lifetime:
        p = store.proxy_from_key(key, lifetime=lifetime)
        assert p == 'x'
    assert not store.exists(key)


def test_proxy_batch_skip_nonproxiable(store: Store[Any]) -> None:
    out = store.proxy_batch([1, None, 'a', True], skip_nonproxiable=True)
    assert out[1] is None
    assert out[3] is True
    assert isinstance(out[0], Proxy)
    assert isinstance(out[2], Proxy)
    assert out[0] == 1
    assert out[2] == 'a'
    with pytest.raises(NonProxiableTypeError):
        store.proxy_batch([1, None])


def test_owned_proxy_skips_nonproxiable_by_default(store: Store[Any]) -> None:
    assert store.owned_proxy(None) is None
    assert store.owned_proxy(False) is False
    with pytest.raises(NonProxiableTypeError):
        store.owned_proxy(None, skip_nonproxiable=False)
    owned = store.owned_proxy([1])
    assert isinstance(owned, OwnedProxy)


def test_into_owned_populate_target(store: Store[Any]) -> None:
    p = store.proxy([1, 2])
    assert is_resolved(p)
    cold = into_owned(p, populate_target=False)
    assert not is_resolved(cold)
    assert cold == [1, 2]
    q = store.proxy([3])
    warm = into_owned(q)
    assert is_resolved(warm)
    del cold, warm


@pytest.mark.parametrize('method', ['proxy', 'proxy_batch', 'proxy_from_key'])
def test_evict_with_a_lifetime_is_refused(store: Store[Any], method: str) -> None:
    lifetime = ContextLifetime(store)
    arg: Any = {'proxy': [1], 'proxy_batch': [[1]], 'proxy_from_key': store.put(1)}[method]
    with pytest.raises(InvalidArgumentError, match='lifetime') as info:
        getattr(store, method)(arg, evict=True, lifetime=lifetime)
    assert isinstance(info.value, ValueError)
    lifetime.close()


def test_polling_factory_waits_for_the_key(store: Store[Any]) -> None:
    key = store.connector.new_key()
    factory: PollingStoreFactory[str] = PollingStoreFactory(
        key,
        store.config(),
        polling_interval=0.001,
        polling_backoff_factor=2,
        polling_interval_limit=0.01,
        store=store,
        evict=True,
    )
    p = Proxy(factory)
    set_it = threading.Event()

    def producer() -> None:
        set_it.wait()
        store.connector.set(key, store.serialize('late'))

    t = threading.Thread(target=producer)
    t.start()
    set_it.set()
    assert p == 'late'
    t.join()
    assert not store.exists(key)


def test_polling_factory_times_out_and_pickles(store: Store[Any]) -> None:
    key = store.connector.new_key()
    factory: PollingStoreFactory[Any] = PollingStoreFactory(
        key, store.config(), polling_interval=0.001, polling_timeout=0.005, store=store
    )
    with pytest.raises(ProxyResolveMissingKeyError):
        factory()
    copy = pickle.loads(pickle.dumps(factory))
    assert isinstance(copy, PollingStoreFactory)
    assert copy.polling_timeout == 0.005
    assert copy.key == key
    with pytest.raises(InvalidArgumentError):
        PollingStoreFactory(key, store.config(), polling_interval=0)


def test_metrics_api(store: Store[Any]) -> None:
    metrics = store.metrics
    assert metrics is not None
    proxies = store.proxy_batch([1, 2, 3])
    batch = metrics.get_metrics(proxies)
    assert batch is not None
    assert batch.times['store.put_batch'].count == 1
    assert metrics.get_metrics([get_key(p) for p in proxies]) == batch
    listed = store.proxy([1, 2])  # a proxy of a list is a proxy, not a list of keys
    assert metrics.get_metrics(listed) is not None
    key = store.put('x')
    metrics.add_time('my.op', key, 5.0)
    metrics.add_counter('my.count', key, 2)
    metrics.add_counter('my.count', key, 3)
    metrics.add_attribute('my.attr', key, 'v')
    m = metrics.get_metrics(key)
    assert m is not None
    assert m.times['my.op'].avg_time_ms == pytest.approx(5.0)
    assert m.times['my.op'].last_time_ms == pytest.approx(5.0)
    assert m.counters['my.count'] == 5
    as_dict = m.as_dict()
    assert as_dict['counters'] == {'my.count': 5}
    assert as_dict['attributes']['my.attr'] == 'v'
    assert as_dict['times']['my.op']['count'] == 1
    assert as_dict['times']['my.op']['max_time_ms'] == pytest.approx(5.0)
