"""The Store: object operations, proxies, cache, metrics, registry, config, seeds."""

from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tether.connectors.file import FileConnector
from tether.connectors.local import LocalConnector
from tether.connectors.redis import RedisConnector
from tether.connectors.shared_memory import SharedMemoryConnector
from tether.exceptions import (
    NonProxiableTypeError,
    ProxyResolveMissingKeyError,
    SerializationError,
    StoreError,
    StoreExistsError,
)
from tether.proxy import Proxy, extract, get_factory, is_resolved
from tether.store import (
    Store,
    StoreConfig,
    StoreFactory,
    get_key,
    get_or_create_store,
    get_store,
    register_store,
    unregister_store,
)
from tether.testing import hammer


@pytest.fixture
def store() -> Any:
    with Store('test-store', LocalConnector()) as s:
        yield s


def test_put_get_exists_evict(store: Store[Any]) -> None:
    key = store.put({'a': 1})
    assert store.exists(key)
    assert store.get(key) == {'a': 1}
    store.evict(key)
    assert not store.exists(key)
    assert store.get(key) is None
    assert store.get(key, default='gone') == 'gone'


def test_put_batch(store: Store[Any]) -> None:
    keys = store.put_batch([1, 'two', [3]])
    assert [store.get(k) for k in keys] == [1, 'two', [3]]


def test_proxy_behaves_like_target(store: Store[Any]) -> None:
    p = store.proxy([1, 2, 3])
    assert isinstance(p, Proxy)
    assert isinstance(p, list)
    assert p == [1, 2, 3]


def test_proxy_populated_locally_and_unresolved_after_pickle(store: Store[Any]) -> None:
    p = store.proxy('value')
    assert is_resolved(p)
    q = pickle.loads(pickle.dumps(p))
    assert not is_resolved(q)
    assert q == 'value'


def test_populate_target_false(store: Store[Any]) -> None:
    p = store.proxy('value', populate_target=False)
    assert not is_resolved(p)
    assert p == 'value'


def test_proxy_knows_class_and_hash_without_resolving(store: Store[Any]) -> None:
    p = pickle.loads(pickle.dumps(store.proxy('abc')))
    assert isinstance(p, str)
    assert hash(p) == hash('abc')
    assert not is_resolved(p)
    arr = pickle.loads(pickle.dumps(store.proxy(np.zeros(3))))
    assert isinstance(arr, np.ndarray)
    with pytest.raises(TypeError, match='unhashable'):
        hash(arr)
    assert not is_resolved(arr)


def test_evict_true_resolves_once_then_key_is_gone(store: Store[Any]) -> None:
    p = store.proxy([1], evict=True, populate_target=False)
    key = get_key(p)
    assert store.exists(key)
    assert p == [1]
    assert not store.exists(key)
    q = store.proxy_from_key(key)
    with pytest.raises(ProxyResolveMissingKeyError, match='test-store'):
        len(q)


def test_missing_key_error_names_store_and_key(store: Store[Any]) -> None:
    key = store.put(1)
    store.evict(key)
    p = store.proxy_from_key(key)
    with pytest.raises(ProxyResolveMissingKeyError) as info:
        int(p)
    assert info.value.store_name == 'test-store'
    assert info.value.key == key
    assert key.id in str(info.value)


def test_nonproxiable(store: Store[Any]) -> None:
    for obj in [None, True, False, NotImplemented, ...]:
        with pytest.raises(NonProxiableTypeError):
            store.proxy(obj)
        assert store.proxy(obj, skip_nonproxiable=True) is obj


def test_proxy_batch(store: Store[Any]) -> None:
    proxies = store.proxy_batch([1, 2, 3], populate_target=False)
    assert [int(p) for p in proxies] == [1, 2, 3]


def test_get_key_and_factory(store: Store[Any]) -> None:
    p = store.proxy('x')
    key = get_key(p)
    assert store.get(key) == 'x'
    factory = get_factory(p)
    assert isinstance(factory, StoreFactory)
    assert factory.key == key
    with pytest.raises(TypeError):
        get_key(Proxy(lambda: 1))


def test_cache_is_bounded_lru() -> None:
    store = Store('cache', LocalConnector(), cache_size=2)
    keys = [store.put(i) for i in range(3)]
    for k in keys:
        store.get(k)
    assert len(store.cache) == 2
    assert keys[0] not in store.cache
    assert keys[2] in store.cache
    store.evict(keys[2])
    assert keys[2] not in store.cache


def test_cache_disabled() -> None:
    store = Store('nocache', LocalConnector(), cache_size=0)
    key = store.put(1)
    store.get(key)
    assert len(store.cache) == 0


def test_metrics() -> None:
    store = Store('metrics', LocalConnector(), metrics=True)
    p = store.proxy(np.zeros(1000), populate_target=False)
    key = get_key(p)
    np.sum(p)
    store.get(key)  # cache hit
    assert store.metrics is not None
    m = store.metrics.get_metrics(p)
    assert m is not None
    assert m.times['store.put'].count == 1
    assert m.times['store.put'].nbytes >= 8000
    assert m.times['store.get'].count == 1
    assert m.times['store.get.cache_hit'].count == 1
    agg = store.metrics.aggregate_times()
    assert agg['store.proxy'].count == 1
    assert agg['store.get'].avg_s > 0
    assert store.cache.hits == 1


def test_metrics_off_by_default(store: Store[Any]) -> None:
    assert store.metrics is None


# Serializers ---------------------------------------------------------------------------


def upper_serializer(obj: Any) -> bytes:
    return str(obj).upper().encode()


def text_deserializer(data: Any) -> str:
    return bytes(data).decode()


def test_custom_serializer_per_store() -> None:
    store = Store(
        'custom', LocalConnector(), serializer=upper_serializer, deserializer=text_deserializer
    )
    key = store.put('abc')
    assert store.get(key) == 'ABC'
    p = pickle.loads(pickle.dumps(store.proxy('xyz')))
    assert p == 'XYZ'


def test_custom_serializer_per_call(store: Store[Any]) -> None:
    key = store.put('abc', serializer=upper_serializer)
    assert store.get(key, deserializer=text_deserializer) == 'ABC'
    p = store.proxy('q', serializer=upper_serializer, deserializer=text_deserializer)
    assert extract(pickle.loads(pickle.dumps(p))) == 'Q'


def test_serializer_returning_non_bytes_raises(store: Store[Any]) -> None:
    with pytest.raises(SerializationError, match='expected bytes'):
        store.put(1, serializer=lambda o: 42)  # type: ignore[arg-type,return-value]


def test_corrupt_bytes_raise_serialization_error(store: Store[Any]) -> None:
    key = store.connector.put(b'\x00garbage that is not a tether object')
    with pytest.raises(SerializationError):
        store.get(key)
    p = store.proxy_from_key(key)
    with pytest.raises(SerializationError):
        len(p)


# Registry ------------------------------------------------------------------------------


def test_register_twice_raises() -> None:
    a = Store('dup', LocalConnector(), register=True)
    with pytest.raises(StoreExistsError, match='dup'):
        Store('dup', LocalConnector(), register=True)
    with pytest.raises(StoreExistsError):
        register_store(a)  # the same store twice is a mistake, as in ProxyStore
    register_store(a, exist_ok=True)
    b = Store('dup', LocalConnector())
    register_store(b, exist_ok=True)
    assert get_store('dup') is b
    unregister_store('dup')
    assert get_store('dup') is None


def test_get_store_of_proxy() -> None:
    s = Store('reg', LocalConnector(), register=True)
    p = s.proxy(1)
    assert get_store(p) is s
    with pytest.raises(StoreError, match='not a store proxy'):
        get_store(Proxy(lambda: 1))  # ProxyStore raises ProxyStoreFactoryError here
    s.close()
    assert get_store('reg') is None


def test_proxy_rebuilds_store_from_config_when_unknown() -> None:
    s = Store('rebuild', LocalConnector())  # not registered
    p = s.proxy([5], populate_target=False)
    q = pickle.loads(pickle.dumps(p))
    assert get_store('rebuild') is None
    assert q == [5]
    rebuilt = get_store('rebuild')
    assert rebuilt is not None
    assert rebuilt is not s
    assert rebuilt.config() == s.config()


def test_get_or_create_store() -> None:
    cfg = Store('goc', LocalConnector()).config()
    a = get_or_create_store(cfg)
    assert get_or_create_store(cfg) is a


def test_closed_store_raises(store: Store[Any]) -> None:
    store.close()
    with pytest.raises(StoreError, match='closed'):
        store.put(1)


# Config --------------------------------------------------------------------------------


def test_config_roundtrip_dict_and_toml(tmp_path: Path) -> None:
    store = Store(
        'cfg',
        FileConnector(tmp_path / 'd'),
        serializer=upper_serializer,
        deserializer=text_deserializer,
        cache_size=4,
        metrics=True,
    )
    cfg = store.config()
    assert StoreConfig.model_validate(cfg.model_dump()) == cfg
    path = tmp_path / 'store.toml'
    cfg.write_toml(path)
    again = StoreConfig.read_toml(path, trusted=True)  # its serializers are not allowlisted
    assert again == cfg
    rebuilt = Store.from_config(again)
    assert rebuilt.name == 'cfg'
    assert isinstance(rebuilt.connector, FileConnector)
    assert rebuilt.serializer is upper_serializer
    assert rebuilt.cache_size == 4
    key = store.put('a')
    assert rebuilt.get(key) == 'A'


def test_config_drops_connector_defaults() -> None:
    c = RedisConnector('127.0.0.1', 6379)
    cfg = Store('small', c).config()
    assert cfg.connector_config == {'hostname': '127.0.0.1'}
    c.close()


def test_bad_toml_raises_config_error(tmp_path: Path) -> None:
    from tether.exceptions import ConfigError

    path = tmp_path / 'bad.toml'
    path.write_text('name = 1\n[[[')
    with pytest.raises(ConfigError):
        StoreConfig.read_toml(path)
    path.write_text('name = "x"\n')  # no connector_type
    with pytest.raises(ConfigError):
        StoreConfig.read_toml(path)


def test_unimportable_serializer_rejected() -> None:
    from tether.exceptions import ConfigError

    with pytest.raises(ConfigError, match='import path'):
        Store('lam', LocalConnector(), serializer=lambda o: b'').config()


# Threads and processes -----------------------------------------------------------------


def test_thread_safety(store: Store[Any]) -> None:
    def work(i: int, j: int) -> None:
        p = store.proxy((i, j), populate_target=False)
        assert p == (i, j)

    hammer(work, threads=6, calls=50)


def consume(p: Any) -> float:
    # Runs in a fresh process that has never seen the store.
    from tether.store import get_store

    assert get_store('xproc') is None
    total = float(np.sum(p))
    assert get_store('xproc') is not None
    return total


@pytest.mark.parametrize('kind', ['file', 'redis', 'shm'])
def test_proxy_resolves_in_another_process(
    kind: str,
    tmp_path: Path,
    redis_connector: RedisConnector,
    shm_namespace: str,
) -> None:
    connector: Any = {
        'file': lambda: FileConnector(tmp_path / 'x'),
        'redis': lambda: redis_connector,
        'shm': lambda: SharedMemoryConnector(shm_namespace),
    }[kind]()
    store = Store('xproc', connector)
    data = np.arange(100_000, dtype=np.float64)
    p = store.proxy(data)
    with ProcessPoolExecutor(1, mp_context=get_context('spawn')) as pool:
        assert pool.submit(consume, p).result(timeout=60) == float(data.sum())


# Seed programs (dissertation figures 3.5 and 3.6), imports changed ---------------------


class MyDataType:
    def __init__(self, values: list[int]) -> None:
        self.values = values


def test_seed_figure_3_5(redis_connector: RedisConnector) -> None:
    from tether.proxy import Proxy
    from tether.store import Store

    Data = MyDataType

    def compute(data: Any) -> int:
        assert isinstance(data, MyDataType)
        return sum(data.values)

    with Store('demo-store', redis_connector) as store:
        data = Data([1, 2, 3])
        proxy = store.proxy(data)
        assert isinstance(proxy, Proxy)
        assert compute(proxy) == 6
        remote = pickle.loads(pickle.dumps(proxy))
        assert compute(remote) == 6
