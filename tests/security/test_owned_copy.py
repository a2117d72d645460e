"""Issue 8 item 4: copying an owner never makes a second owner that evicts the object.

``copy.copy``/``copy.deepcopy`` of an ``OwnedProxy`` raise (``clone`` is the explicit
copy); copies of borrows are counted borrows; and no path that yields two owners of one
object in a process (``into_owned`` twice, unpickling one message twice) evicts the object
while one of them is alive.
"""

from __future__ import annotations

import copy
import gc
import pickle
from collections.abc import Iterator
from typing import Any

import pytest

from tether.connectors.local import LocalConnector
from tether.exceptions import OwnershipError
from tether.store import Store, get_key
from tether.store.ref import RefProxy, borrow, clone, drop, into_owned, mut_borrow


@pytest.fixture
def store() -> Iterator[Store[Any]]:
    with Store('owned-copy', LocalConnector()) as s:
        yield s


@pytest.mark.parametrize('copier', [copy.copy, copy.deepcopy])
def test_copying_an_owner_raises_and_keeps_the_object(store: Store[Any], copier: Any) -> None:
    owner = store.owned_proxy([1, 2, 3])
    with pytest.raises(OwnershipError, match='clone'):
        copier(owner)
    gc.collect()
    assert store.exists(get_key(owner))
    assert owner == [1, 2, 3]


def test_deepcopy_of_a_container_with_an_owner_raises(store: Store[Any]) -> None:
    owner = store.owned_proxy({'a': 1})
    with pytest.raises(OwnershipError):
        copy.deepcopy({'x': [owner]})
    assert owner['a'] == 1


def test_clone_is_the_explicit_copy(store: Store[Any]) -> None:
    owner = store.owned_proxy([1, 2])
    twin = clone(owner)
    assert get_key(twin) != get_key(owner)
    del twin
    gc.collect()
    assert owner == [1, 2]


def _deep(proxy: Any) -> Any:
    """A deep copy of ``proxy`` made as part of a container's (the usual way one happens)."""
    return copy.deepcopy({'x': [proxy]})['x'][0]


COPIERS = pytest.mark.parametrize('copier', [copy.copy, _deep], ids=['copy', 'deepcopy'])


@COPIERS
def test_copy_of_a_borrow_is_a_counted_borrow(store: Store[Any], copier: Any) -> None:
    owner = store.owned_proxy([1, 2])
    ref = borrow(owner)
    ref2 = copier(ref)
    assert type(ref2) is RefProxy
    assert get_key(ref2) == get_key(owner)
    del ref
    gc.collect()
    # ref2 still borrows: the owner cannot be dropped yet.
    with pytest.raises(OwnershipError, match='borrowed'):
        drop(owner)
    assert ref2 == [1, 2]
    del ref2
    gc.collect()
    drop(owner)
    assert not store.exists(get_key(owner))


@COPIERS
def test_copy_of_a_mutable_borrow_raises(store: Store[Any], copier: Any) -> None:
    owner = store.owned_proxy([1])
    mut = mut_borrow(owner)
    with pytest.raises(OwnershipError, match='one mutable borrow'):
        copier(mut)


def test_two_owners_of_one_object_evict_when_the_last_ends(store: Store[Any]) -> None:
    plain = store.proxy([4, 5])
    first = into_owned(plain)
    second = into_owned(plain)
    key = get_key(first)
    del first
    gc.collect()
    assert store.exists(key)
    assert second == [4, 5]
    del second
    gc.collect()
    assert not store.exists(key)


def test_a_message_unpickled_twice_evicts_after_both(store: Store[Any]) -> None:
    owner = store.owned_proxy([7])
    key = get_key(owner)
    data = pickle.dumps(owner)
    a = pickle.loads(data)
    b = pickle.loads(data)
    del owner, a
    gc.collect()
    assert store.exists(key)
    assert b == [7]
    del b
    gc.collect()
    assert not store.exists(key)
