"""Issue 8 item 14: protocols a transparent proxy must forward, and dispatch on user values.

``next(proxy)`` on a proxy of an iterator, three-argument ``pow``, and functions that take
"a name/key or a proxy" (``get_store``, ``get_metrics``) given proxies of ``str`` and
``tuple``: they must test ``isinstance(x, Proxy)`` before looking at the value.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tether.connectors.local import LocalConnector
from tether.proxy import Proxy, is_resolved
from tether.store import Store, get_key, get_store


def test_next_on_a_proxy_of_an_iterator() -> None:
    p: Proxy[Iterator[int]] = Proxy(lambda: iter([1, 2]))
    assert next(p) == 1
    assert next(p) == 2
    with pytest.raises(StopIteration):
        next(p)
    assert next(p, 'done') == 'done'


def test_next_on_a_proxy_of_a_generator() -> None:
    def gen() -> Iterator[str]:
        yield 'a'
        yield 'b'

    p: Proxy[Iterator[str]] = Proxy(gen)
    assert list(p) == ['a', 'b']


def test_next_on_a_proxy_of_a_non_iterator_raises_type_error() -> None:
    with pytest.raises(TypeError):
        next(Proxy(lambda: [1, 2]))


def test_three_argument_pow() -> None:
    p = Proxy(lambda: 3)
    assert pow(p, 2, 2) == 1
    assert pow(p, 2, 5) == 4
    assert pow(p, 2) == 9
    assert p**2 == 9
    assert 2**p == 8
    q = Proxy(lambda: 7)
    q **= 2
    assert q == 49


@pytest.fixture
def store() -> Iterator[Store[Any]]:
    with Store('protocols', LocalConnector(), metrics=True, register=True) as s:
        yield s


@pytest.mark.parametrize('value', ['protocols', ('a', 'b'), 'x'])
def test_get_store_of_proxies_of_str_and_tuple(store: Store[Any], value: Any) -> None:
    p = store.proxy(value, populate_target=False)
    assert get_store(p) is store
    assert not is_resolved(p)


@pytest.mark.parametrize('value', ['text', ('a', 1)])
def test_get_metrics_of_proxies_of_str_and_tuple(store: Store[Any], value: Any) -> None:
    assert store.metrics is not None
    p = store.proxy(value, populate_target=False)
    metrics = store.metrics.get_metrics(p)
    assert metrics is not None
    assert 'store.proxy' in metrics.times
    assert store.metrics.get_metrics(get_key(p)) is not None
    assert not is_resolved(p)


def test_get_store_by_name_still_works(store: Store[Any]) -> None:
    assert get_store('protocols') is store
    assert get_store('no-such-store') is None
