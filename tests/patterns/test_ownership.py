"""Ownership and borrowing: every rule, moves across processes, eviction, scopes.submit."""

from __future__ import annotations

import gc
import pickle
import sys
from typing import Any

import pytest

from tether.exceptions import OwnershipError, StoreError
from tether.proxy import Proxy, is_resolved
from tether.store import Store
from tether.store.ref import (
    OwnedProxy,
    RefMutProxy,
    RefProxy,
    _get_state,
    borrow,
    clone,
    drop,
    into_owned,
    mut_borrow,
    update,
)
from tether.store.scopes import submit

from . import _tasks


def test_owned_proxy_behaves_like_its_target(store: Store[Any]) -> None:
    owned = store.owned_proxy([1, 2, 3])
    assert isinstance(owned, OwnedProxy)
    assert isinstance(owned, Proxy)
    assert isinstance(owned, list)
    assert owned == [1, 2, 3]
    assert sum(owned) == 6


def test_owner_going_out_of_scope_evicts(store: Store[Any], keys: Any) -> None:
    owned = store.owned_proxy('value')
    assert keys() == 1
    del owned
    gc.collect()
    assert keys() == 0


def test_many_shared_borrows(store: Store[Any]) -> None:
    owned = store.owned_proxy([1, 2])
    refs = [borrow(owned) for _ in range(3)]
    assert all(isinstance(r, RefProxy) for r in refs)
    assert all(r == [1, 2] for r in refs)


def test_shared_borrow_is_read_only(store: Store[Any]) -> None:
    owned = store.owned_proxy({'a': 1})
    ref = borrow(owned)
    with pytest.raises(OwnershipError, match='read-only'):
        ref['a'] = 2
    with pytest.raises(OwnershipError, match='read-only'):
        del ref['a']
    with pytest.raises(OwnershipError, match='update'):
        update(ref)


def test_mut_borrow_excludes_shared_borrows(store: Store[Any]) -> None:
    owned = store.owned_proxy([1])
    ref = borrow(owned)
    with pytest.raises(OwnershipError, match='already borrowed'):
        mut_borrow(owned)
    del ref
    mut = mut_borrow(owned)
    assert isinstance(mut, RefMutProxy)
    with pytest.raises(OwnershipError, match='mutably borrowed'):
        borrow(owned)
    with pytest.raises(OwnershipError, match='already borrowed'):
        mut_borrow(owned)
    with pytest.raises(OwnershipError, match='mutably borrowed'):
        clone(owned)


def test_owner_cannot_be_dropped_or_mutated_while_borrowed(store: Store[Any]) -> None:
    owned = store.owned_proxy({'k': 1})
    ref = borrow(owned)
    with pytest.raises(OwnershipError, match='while it is borrowed'):
        drop(owned)
    with pytest.raises(OwnershipError, match='while it is borrowed'):
        owned['k'] = 2
    with pytest.raises(OwnershipError, match='while it is borrowed'):
        update(owned)
    with pytest.raises(OwnershipError, match='while it is borrowed'):
        pickle.dumps(owned)
    del ref
    owned['k'] = 2
    update(owned)
    drop(owned)
    with pytest.raises(OwnershipError, match='dropped'):
        borrow(owned)


def test_owner_out_of_scope_while_borrowed_lives_until_borrow_ends(
    store: Store[Any],
    keys: Any,
) -> None:
    owned = store.owned_proxy('v')
    ref = borrow(owned)
    del owned
    gc.collect()
    assert keys() == 1  # still borrowed: kept
    assert ref == 'v'
    del ref
    gc.collect()
    assert keys() == 0


def test_owner_collected_while_counted_as_borrowed_reports(
    store: Store[Any],
    keys: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[BaseException | None] = []
    monkeypatch.setattr(sys, 'unraisablehook', lambda u: seen.append(u.exc_value))
    owned = store.owned_proxy('v')
    ref = borrow(owned)
    _get_state(ref).owner_proxy = None  # a borrow that no longer pins its owner
    del owned
    gc.collect()
    assert len(seen) == 1
    assert isinstance(seen[0], OwnershipError)
    assert 'while borrowed' in str(seen[0])
    assert keys() == 1
    assert ref == 'v'


def test_mut_borrow_update_is_seen_by_the_owner_elsewhere(store: Store[Any]) -> None:
    owned = store.owned_proxy([1, 2])
    mut = mut_borrow(owned)
    mut.append(3)
    update(mut)
    del mut
    fresh = store.proxy_from_key(owned.__proxy_factory__.key)
    assert fresh == [1, 2, 3]


def test_clone_makes_an_independent_owner(store: Store[Any], keys: Any) -> None:
    owned = store.owned_proxy([1])
    copy = clone(owned)
    assert keys() == 2
    assert copy == [1]
    drop(owned)
    assert keys() == 1
    assert copy == [1]
    del copy
    gc.collect()
    assert keys() == 0


def test_into_owned(store: Store[Any], keys: Any) -> None:
    plain = store.proxy('x')
    owned = into_owned(plain)
    assert isinstance(owned, OwnedProxy)
    with pytest.raises(OwnershipError, match='into_owned'):
        into_owned(owned)
    with pytest.raises(OwnershipError, match='into_owned'):
        into_owned(borrow(owned))
    with pytest.raises(StoreError, match='store proxy'):
        into_owned(Proxy(lambda: 1))
    del owned
    gc.collect()
    assert keys() == 0


def test_functions_need_an_owner(store: Store[Any]) -> None:
    plain = store.proxy([1])
    for fn in (borrow, mut_borrow, clone, drop):
        with pytest.raises(OwnershipError, match='needs an OwnedProxy'):
            fn(plain)  # type: ignore[arg-type]


def test_pickling_moves_ownership(store: Store[Any], keys: Any) -> None:
    owned = store.owned_proxy([5, 6])
    data = pickle.dumps(owned)
    with pytest.raises(OwnershipError, match='moved'):
        owned.append(7)
    with pytest.raises(OwnershipError, match='moved'):
        borrow(owned)
    assert pickle.dumps(owned)  # re-serializing the move is allowed (not unpickled here)
    del owned
    gc.collect()
    assert keys() == 1  # the sender no longer owns it: nothing was evicted
    received = pickle.loads(data)
    assert isinstance(received, OwnedProxy)
    assert not is_resolved(received)
    assert received == [5, 6]
    del received
    gc.collect()
    assert keys() == 0


def test_moved_to_a_process_task_is_evicted_there(
    store: Store[Any],
    keys: Any,
    process_pool: Any,
) -> None:
    owned = store.owned_proxy([1, 2, 3])
    assert process_pool.submit(_tasks.keep_owned, owned).result(timeout=60) == 3
    # The worker owned it and dropped it when the task's arguments were released.
    for _ in range(100):
        if keys() == 0:
            break
        import time

        time.sleep(0.05)
    assert keys() == 0


def test_scopes_submit_seed_figure_4_7(store: Store[Any], keys: Any, process_pool: Any) -> None:
    proxy = store.owned_proxy([1, 2, 3])
    borrowed = borrow(proxy)
    future = submit(process_pool.submit, args=(sum, borrowed))
    assert future.result(timeout=60) == 6
    # Task is completed so the owned proxy is no longer borrowed
    drop(proxy)
    assert keys() == 0
    del borrowed


def test_scopes_submit_mut_borrow_across_process(store: Store[Any], process_pool: Any) -> None:
    owned = store.owned_proxy([1])
    future = submit(
        process_pool.submit,
        args=(_tasks.append_and_update, mut_borrow(owned)),
        kwargs={'value': 2},
    )
    future.result(timeout=60)
    # The borrow ended with the task: the owner may borrow again, and sees the update.
    ref = borrow(owned)
    assert store.proxy_from_key(owned.__proxy_factory__.key) == [1, 2]
    del ref


def test_scopes_finds_borrows_in_containers_and_releases_on_submit_error(
    store: Store[Any],
) -> None:
    owned = store.owned_proxy('v')

    def failing_submit(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError('engine down')

    with pytest.raises(RuntimeError, match='engine down'):
        submit(failing_submit, args=(len, [borrow(owned)], {'x': borrow(owned)}))
    drop(owned)  # both borrows were ended


def test_nothing_left_after_ownership_workflow(
    store: Store[Any],
    keys: Any,
    dask_client: Any,
) -> None:
    before = keys()
    data = [store.owned_proxy(list(range(100))) for _ in range(4)]
    futures = [submit(dask_client.submit, args=(sum, borrow(d))) for d in data]
    assert [f.result(timeout=60) for f in futures] == [4950] * 4
    del futures
    import time

    for _ in range(100):
        try:
            for d in data:
                drop(d)
            break
        except OwnershipError:
            time.sleep(0.05)
    assert keys() == before
