"""Issue 8 item 6: a proxy's class is what its deserializer returns, not the input's.

With a custom deserializer the target's class is not known in advance: a proxy that
resolves through it must not claim the input's class (or hash, or value), and once
resolved it reports the real class. Populated (``populate_target``, ProxyStore's rule,
issue 29), the proxy's target in the process that made it is the object given; a pickled
copy still claims nothing from that object.
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


def test_per_call_deserializer_unpopulated(store: Store[Any]) -> None:
    p = store.proxy(
        pickle.dumps([1, 2, 3]),
        serializer=_identity,
        deserializer=pickle.loads,
        populate_target=False,
    )
    assert not is_resolved(p)
    assert p.__class__ is list
    assert isinstance(p, list)
    assert not isinstance(p, bytes)
    assert p == [1, 2, 3]
    assert type(pickle.loads(pickle.dumps(p))).__name__ == 'Proxy'


@pytest.mark.parametrize('populate', [True, None])
def test_per_call_deserializer_populated(store: Store[Any], populate: bool | None) -> None:
    data = pickle.dumps([1, 2, 3])
    p = store.proxy(
        data, serializer=_identity, deserializer=pickle.loads, populate_target=populate
    )
    assert is_resolved(p)
    assert p == data  # the object given, as ProxyStore populates it
    elsewhere = pickle.loads(pickle.dumps(p))
    assert not is_resolved(elsewhere)
    assert elsewhere.__class__ is list  # not the given object's class: it resolves
    assert elsewhere == [1, 2, 3]


def test_store_deserializer(store: Store[Any]) -> None:
    with Store(
        'deser-class-store',
        LocalConnector(),
        serializer=_identity,
        deserializer=pickle.loads,
    ) as s:
        p = s.proxy(pickle.dumps((1, 2)), populate_target=False)
        assert isinstance(p, tuple)
        assert p == (1, 2)
        assert hash(p) == hash((1, 2))
        q = pickle.loads(pickle.dumps(s.proxy(pickle.dumps((1, 2)))))
        assert q.__class__ is tuple
        assert q == (1, 2)


def test_default_deserializer_keeps_the_metadata(store: Store[Any]) -> None:
    p = store.proxy([1], populate_target=False)
    assert not is_resolved(p)
    assert isinstance(p, list)
    assert not is_resolved(p)
