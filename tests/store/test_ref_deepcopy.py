"""``copy.deepcopy`` of an ownership proxy is its ``copy.copy``: the object stays in the
store, so a deep copy of a borrow is another counted borrow of the same owner, and a deep
copy of a mutable borrow is refused as its copy is."""

from __future__ import annotations

import copy
import gc
from collections.abc import Iterator
from typing import Any

import pytest

from tether.connectors.local import LocalConnector
from tether.exceptions import OwnershipError
from tether.store import Store
from tether.store.ref import RefProxy, borrow, drop, mut_borrow
from tether.store.utils import get_key


@pytest.fixture
def store() -> Iterator[Store[Any]]:
    with Store('ref-deepcopy', LocalConnector()) as s:
        yield s


def test_deepcopy_of_a_borrow_is_a_counted_borrow(store: Store[Any]) -> None:
    owner = store.owned_proxy([1, 2])
    ref = borrow(owner)
    twin = copy.deepcopy({'x': [ref]})['x'][0]
    assert type(twin) is RefProxy
    assert get_key(twin) == get_key(owner)
    del ref
    gc.collect()
    with pytest.raises(OwnershipError, match='borrowed'):
        drop(owner)
    assert twin == [1, 2]
    del twin
    gc.collect()
    drop(owner)
    assert not store.exists(get_key(owner))


def test_deepcopy_of_a_mutable_borrow_raises(store: Store[Any]) -> None:
    owner = store.owned_proxy([1])
    mut = mut_borrow(owner)
    with pytest.raises(OwnershipError, match='one mutable borrow'):
        copy.deepcopy(mut)
