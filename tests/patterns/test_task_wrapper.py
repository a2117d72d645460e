"""TaskWrapper: the task wrapper StoreExecutor and the Dask plugin submit, called directly."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

import tether.store.executor as executor_mod
from tether.proxy import Proxy, extract
from tether.store import Store
from tether.store.executor import ProxySize, TaskWrapper
from tether.store.ref import OwnedProxy


def test_small_result_as_is_without_opening_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_store(config: Any) -> Any:
        raise AssertionError('the store was opened for a small result')

    monkeypatch.setattr(executor_mod, 'get_or_create_store', no_store)
    task = TaskWrapper(bytes, object(), ProxySize(100), ownership=False)  # type: ignore[arg-type]
    assert task(10) == b'\0' * 10
    assert task.__name__ == 'bytes'


def test_large_result_proxied_owned_or_not(store: Store[Any]) -> None:
    owned = TaskWrapper(bytes, store.config(), ProxySize(100))(1000)
    assert isinstance(owned, OwnedProxy)
    assert extract(owned) == b'\0' * 1000
    plain = TaskWrapper(bytes, store.config(), ProxySize(100), ownership=False)(1000)
    assert isinstance(plain, Proxy)
    assert not isinstance(plain, OwnedProxy)
    assert extract(plain) == b'\0' * 1000


def test_result_key_stores_under_the_given_key(store: Store[Any]) -> None:
    deferrable = store.capabilities.deferrable
    assert deferrable is not None
    key = deferrable.new_key()
    task = TaskWrapper(bytes, store.config(), ProxySize(100), ownership=False, result_key=key)
    task = pickle.loads(pickle.dumps(task))  # it travels to the worker
    result = task(1000)
    assert isinstance(result, Proxy)
    assert store.exists(key)
    assert extract(result) == b'\0' * 1000
    store.evict(key)


def test_result_key_needs_one_plain_result(store: Store[Any]) -> None:
    with pytest.raises(ValueError, match='result_key'):
        TaskWrapper(bytes, store.config(), ProxySize(100), result_key='k')
    with pytest.raises(ValueError, match='result_key'):
        TaskWrapper(bytes, store.config(), ProxySize(100), False, True, 'k')
