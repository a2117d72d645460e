"""The API for proxy subclasses, and the one pickling rule every proxy class follows."""

from __future__ import annotations

import copy
import functools
import pickle
from typing import Any, TypeVar

import pytest

from tether.proxy import (
    LOCAL_NAMES,
    MISSING,
    Proxy,
    ProxyMetadata,
    extract,
    get_factory,
    get_metadata,
    is_resolved,
    metadata_of,
    set_metadata,
    set_target,
)

T = TypeVar('T')


def make_list() -> list[int]:
    return [1, 2, 3]


class Tagged(Proxy[T]):
    """A subclass with a method and a class attribute of its own."""

    kind = 'tagged'

    def describe(self) -> str:
        return f'tagged proxy of {get_metadata(self).target_class}'


class Counting(Proxy[T]):
    """A subclass whose constructor takes more than the factory (with defaults)."""

    built: list[int] = []  # noqa: RUF012 - counts constructions across the test

    def __init__(self, factory: Any, *, start: int = 0) -> None:
        super().__init__(factory)
        Counting.built.append(start)


def test_subclass_round_trips_as_its_own_class() -> None:
    p: Tagged[list[int]] = Tagged(make_list)
    set_metadata(p, metadata_of([1, 2, 3]))
    q = pickle.loads(pickle.dumps(p))
    assert type(q) is Tagged
    assert not is_resolved(q)
    assert q.describe() == "tagged proxy of <class 'list'>"
    assert q.kind == 'tagged'
    assert isinstance(q, list)  # from the carried metadata
    assert not is_resolved(q)
    assert q == [1, 2, 3]


def test_subclass_copy_keeps_its_class_and_metadata() -> None:
    p: Tagged[str] = Tagged(functools.partial(str, 'abc'))
    set_metadata(p, metadata_of('abc'))
    for q in (copy.copy(p), copy.deepcopy(p)):
        assert type(q) is Tagged
        assert get_metadata(q) == get_metadata(p)
        assert hash(q) == hash('abc')
        assert not is_resolved(q)


def test_subclass_is_rebuilt_by_calling_it_with_the_factory() -> None:
    Counting.built.clear()
    p: Counting[list[int]] = Counting(make_list, start=5)
    q = pickle.loads(pickle.dumps(p))
    assert type(q) is Counting
    assert Counting.built == [5, 0]
    assert get_factory(q) is make_list


def test_plain_proxy_still_pickles_as_proxy() -> None:
    p: Proxy[list[int]] = Proxy(make_list)
    assert type(pickle.loads(pickle.dumps(p))) is Proxy
    set_metadata(p, metadata_of([1]))
    q = pickle.loads(pickle.dumps(p))
    assert type(q) is Proxy
    assert get_metadata(q).target_class is list


def test_metadata_of_and_unhashable_targets() -> None:
    assert metadata_of('x') == ProxyMetadata(str, hash('x'), False)
    assert metadata_of([1]) == ProxyMetadata(list, None, True)
    p: Proxy[list[int]] = Proxy(make_list)
    assert get_metadata(p) == ProxyMetadata()
    set_metadata(p, metadata_of([1]))
    q = pickle.loads(pickle.dumps(p))
    with pytest.raises(TypeError, match='unhashable'):
        hash(q)
    assert not is_resolved(q)


def test_set_target_resolves_without_the_factory() -> None:
    def boom() -> list[int]:
        raise AssertionError('the factory must not run')

    p: Proxy[list[int]] = Proxy(boom)
    set_target(p, [4])
    assert is_resolved(p)
    assert extract(p) == [4]
    assert get_factory(p) is boom


def test_marker_and_local_names() -> None:
    assert repr(MISSING) == '<missing>'
    p: Proxy[list[int]] = Proxy(make_list, target=MISSING)
    assert not is_resolved(p)
    assert {'__reduce__', '__class__', '__proxy_factory__'} <= LOCAL_NAMES
    assert '__len__' not in LOCAL_NAMES


def test_ownership_proxy_round_trips_as_its_class() -> None:
    from tether.connectors.local import LocalConnector
    from tether.store import Store
    from tether.store.ref import OwnedProxy, RefProxy, borrow, drop

    with Store('subclass-pickle', LocalConnector(), register=True) as store:
        owned = store.owned_proxy([1, 2])
        ref = borrow(owned)
        got = pickle.loads(pickle.dumps(ref))
        assert type(got) is RefProxy
        assert get_metadata(got).target_class is list
        assert got == [1, 2]
        del ref, got
        moved = pickle.loads(pickle.dumps(owned))
        assert type(moved) is OwnedProxy
        assert moved == [1, 2]
        drop(moved)
