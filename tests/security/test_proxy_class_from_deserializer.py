"""Issue 8 item 6: a proxy's class is what its deserializer returns, not the input's.

With a custom deserializer the target's class is not known in advance: the proxy must not
claim the input's class (or hash, or value), and once resolved it reports the real class.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pytest

from tether.connectors.local import LocalConnector
from tether.proxy import is_resolved
from tether.store import Store


def _identity(b: bytes) -> bytes:
    return b


@pytest.fixture
def store() -> Iterator[Store[Any]]:
    with Store('deser-class', LocalConnector()) as s:
        yield s


@pytest.mark.parametrize('populate', [False, True, None])
def test_per_call_deserializer(store: Store[Any], populate: bool | None) -> None:
    p = store.proxy(
        pickle.dumps([1, 2, 3]),
        serializer=_identity,
        deserializer=pickle.loads,
        populate_target=populate,
    )
    assert not is_resolved(p)
    assert p.__class__ is list
    assert isinstance(p, list)
    assert not isinstance(p, bytes)
    assert p == [1, 2, 3]
    assert type(pickle.loads(pickle.dumps(p))).__name__ == 'Proxy'


def test_store_deserializer(store: Store[Any]) -> None:
    with Store(
        'deser-class-store',
        LocalConnector(),
        serializer=_identity,
        deserializer=pickle.loads,
    ) as s:
        p = s.proxy(pickle.dumps((1, 2)))
        assert isinstance(p, tuple)
        assert p == (1, 2)
        assert hash(p) == hash((1, 2))
        q = pickle.loads(pickle.dumps(p))
        assert q.__class__ is tuple


def test_default_deserializer_keeps_the_metadata(store: Store[Any]) -> None:
    p = store.proxy([1], populate_target=False)
    assert not is_resolved(p)
    assert isinstance(p, list)
    assert not is_resolved(p)
