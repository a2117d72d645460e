"""Issue 8 item 5: every use of an invalidated ownership proxy raises ``OwnershipError``.

An owner that was moved (pickled) or dropped, a borrow that was sent (pickled), and a
borrow whose task finished (``scopes.submit``) must raise on operators, ``len``,
iteration, comparisons and the rest, not only on attribute access. ``into_owned`` does not
resolve its argument.
"""

from __future__ import annotations

import concurrent.futures
import gc
import operator
import pickle
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tether.connectors.local import LocalConnector
from tether.exceptions import OwnershipError
from tether.proxy import Proxy, is_resolved
from tether.store import Store, get_key
from tether.store.ref import borrow, drop, into_owned, mut_borrow
from tether.store.scopes import submit

USES: list[tuple[str, Callable[[Any], Any]]] = [
    ('eq', lambda p: p == [1, 2, 3]),
    ('ne', lambda p: p != [1]),
    ('lt', lambda p: p < [9]),
    ('len', len),
    ('iter', lambda p: list(iter(p))),
    ('contains', lambda p: 1 in p),
    ('getitem', lambda p: p[0]),
    ('add', lambda p: operator.add(p, [4])),
    ('radd', lambda p: operator.add([0], p)),
    ('mul', lambda p: p * 2),
    ('bool', bool),
    ('str', str),
    ('format', lambda p: f'{p}'),
    ('hash', hash),
    ('reversed', lambda p: list(reversed(p))),
    ('attribute', lambda p: p.count(1)),
    ('dir', dir),
    ('iadd', lambda p: operator.iadd(p, [4])),
]


@pytest.fixture
def store() -> Iterator[Store[Any]]:
    with Store('invalidated', LocalConnector()) as s:
        yield s


@pytest.mark.parametrize(('name', 'use'), USES, ids=[u[0] for u in USES])
def test_moved_owner_raises_on_every_use(store: Store[Any], name: str, use: Any) -> None:
    owner = store.owned_proxy([1, 2, 3])
    pickle.dumps(owner)
    with pytest.raises(OwnershipError, match='moved'):
        use(owner)


@pytest.mark.parametrize(('name', 'use'), USES, ids=[u[0] for u in USES])
def test_dropped_owner_raises_on_every_use(store: Store[Any], name: str, use: Any) -> None:
    owner = store.owned_proxy([1, 2, 3])
    drop(owner)
    with pytest.raises(OwnershipError, match='dropped'):
        use(owner)


@pytest.mark.parametrize('make', ['borrow', 'mut_borrow'])
@pytest.mark.parametrize(('name', 'use'), USES, ids=[u[0] for u in USES])
def test_sent_borrow_raises_on_every_use(
    store: Store[Any], make: str, name: str, use: Any
) -> None:
    owner = store.owned_proxy([1, 2, 3])
    ref = borrow(owner) if make == 'borrow' else mut_borrow(owner)
    received = pickle.loads(pickle.dumps(ref))
    with pytest.raises(OwnershipError, match='sent'):
        use(ref)
    # The copy that was sent is the usable one.
    assert received == [1, 2, 3]


def test_sent_mutable_borrow_cannot_mutate(store: Store[Any]) -> None:
    owner = store.owned_proxy([1, 2, 3])
    mut = mut_borrow(owner)
    pickle.dumps(mut)
    with pytest.raises(OwnershipError):
        mut[0] = 5


@pytest.mark.parametrize(('name', 'use'), USES, ids=[u[0] for u in USES])
def test_borrow_after_its_task_finished_raises(store: Store[Any], name: str, use: Any) -> None:
    owner = store.owned_proxy([1, 2, 3])
    ref = borrow(owner)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        future = submit(pool.submit, args=(sum, ref))
        assert future.result() == 6
    with pytest.raises(OwnershipError, match='ended'):
        use(ref)
    del ref
    gc.collect()
    drop(owner)


def test_into_owned_does_not_resolve(store: Store[Any]) -> None:
    calls = []

    def factory() -> list[int]:
        calls.append(1)
        return [1]

    # A plain proxy whose class is unknown: isinstance() on it would resolve it.
    plain: Proxy[list[int]] = store.proxy_from_key(store.put([1]))
    with pytest.raises(Exception, match='store proxy'):
        into_owned(Proxy(factory))
    owner = into_owned(plain)
    assert not is_resolved(plain)
    assert not is_resolved(owner)
    assert calls == []
    key = get_key(owner)
    del owner
    gc.collect()
    assert not store.exists(key)
