"""The conformance suite: every connector passes these tests."""

from __future__ import annotations

import pickle
import threading
from typing import Any

import pytest

from tether.connectors.protocols import Connector, DeferrableConnector
from tether.store import Store


def test_is_a_connector(connector: Any) -> None:
    assert isinstance(connector, Connector)


def test_put_get_roundtrip(connector: Any) -> None:
    key = connector.put(b'hello')
    assert bytes(connector.get(key)) == b'hello'


def test_empty_value(connector: Any) -> None:
    key = connector.put(b'')
    assert connector.exists(key)
    assert bytes(connector.get(key)) == b''


def test_binary_value_with_all_byte_values(connector: Any) -> None:
    data = bytes(range(256)) * 1000
    key = connector.put(data)
    assert bytes(connector.get(key)) == data


def test_accepts_bytearray_and_memoryview(connector: Any) -> None:
    k1 = connector.put(bytearray(b'abc'))
    k2 = connector.put(memoryview(b'xyz'))
    assert bytes(connector.get(k1)) == b'abc'
    assert bytes(connector.get(k2)) == b'xyz'


def test_missing_key_gets_none(connector: Any) -> None:
    key = connector.put(b'x')
    connector.evict(key)
    assert connector.get(key) is None
    assert not connector.exists(key)


def test_evict_missing_is_not_an_error(connector: Any) -> None:
    key = connector.put(b'x')
    connector.evict(key)
    connector.evict(key)


def test_keys_are_unique(connector: Any) -> None:
    keys = [connector.put(b'same') for _ in range(20)]
    assert len(set(keys)) == 20


def test_keys_are_small_picklable_tuples(connector: Any) -> None:
    key = connector.put(b'x')
    assert isinstance(key, tuple)
    assert pickle.loads(pickle.dumps(key)) == key
    assert len(pickle.dumps(key)) < 200


def test_batch(connector: Any) -> None:
    datas = [f'item-{i}'.encode() for i in range(10)]
    keys = connector.put_batch(datas)
    assert len(keys) == 10
    got = connector.get_batch(keys)
    assert [bytes(g) for g in got] == datas
    connector.evict(keys[3])
    got = connector.get_batch(keys)
    assert got[3] is None
    assert bytes(got[4]) == datas[4]


def test_empty_batch(connector: Any) -> None:
    assert connector.put_batch([]) == []
    assert connector.get_batch([]) == []


def test_large_value(connector: Any) -> None:
    data = bytes(8 * 1024 * 1024) + b'end'
    key = connector.put(data)
    assert bytes(connector.get(key)) == data


def test_config_roundtrip(connector: Any) -> None:
    config = connector.config()
    assert isinstance(config, dict)
    other = type(connector).from_config(config)
    assert other.config() == config
    key = connector.put(b'shared')
    assert bytes(other.get(key)) == b'shared'


def test_deferrable(connector: Any) -> None:
    if not isinstance(connector, DeferrableConnector):
        pytest.fail(f'{type(connector).__name__} should be deferrable')
    key = connector.new_key()
    assert not connector.exists(key)
    connector.set(key, b'later')
    assert bytes(connector.get(key)) == b'later'
    key2 = connector.new_key(b'now')
    assert bytes(connector.get(key2)) == b'now'


def test_concurrent_puts_and_gets(connector: Any) -> None:
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for j in range(20):
                data = f'{i}-{j}'.encode() * 100
                key = connector.put(data)
                assert bytes(connector.get(key)) == data
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_store_roundtrip_over_connector(connector: Any) -> None:
    store = Store('conformance', connector, cache_size=0)
    obj = {'a': [1, 2, 3], 'b': 'text'}
    key = store.put(obj)
    assert store.get(key) == obj
    proxy = store.proxy(obj, populate_target=False)
    assert proxy == obj
