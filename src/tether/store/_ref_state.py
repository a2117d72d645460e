"""The state behind ownership proxies (tether.store.ref): who owns, who borrows, which
owners are alive in this process, and how an owner's object is evicted."""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, NoReturn

from tether.exceptions import (
    OwnerCopyError,
    OwnershipError,
    ReferenceInvalidError,
)
from tether.proxy import Proxy, get_factory
from tether.store._registry import get_or_create_store, registered_store
from tether.store.factory import StoreFactory
from tether.store.utils import get_store_factory

if TYPE_CHECKING:
    from tether.store._store import Store

__all__ = [
    'OwnerState',
    'RefState',
    'check_state',
    'describe',
    'evict_target',
    'owner_born',
    'owner_gone',
    'owner_id',
    'refuse_copy',
    'refuse_write',
    'store_of',
]

logger = logging.getLogger('tether.store.ref')


class OwnerState:
    __slots__ = ('dropped', 'lock', 'moved', 'mut', 'pid', 'refs')

    def __init__(self) -> None:
        self.refs = 0
        self.mut = False
        self.moved = False
        self.dropped = False
        self.lock = threading.Lock()
        # A forked child inherits copies of its parent's owners: they are not owners
        # there and never evict.
        self.pid = os.getpid()


class RefState:
    __slots__ = ('ended', 'owner', 'owner_proxy', 'released', 'sent')

    def __init__(self, owner: OwnerState | None, owner_proxy: Any = None) -> None:
        self.owner = owner
        # A live local borrow keeps its owner alive (so the owner is not collected while
        # borrowed); the reference is dropped when the borrow ends.
        self.owner_proxy = owner_proxy
        self.released = owner is None
        # ``ended``: the borrow ended (its task finished); ``sent``: it was pickled to
        # another process. Either way this local object must not be used any more. A
        # borrow that arrived by unpickling (no owner here) has neither.
        self.ended = False
        self.sent = False


# Live owners of each object in this process, by (store name, key): an object is evicted
# when the last of them ends, never while another live owner holds it.
_live_owners: dict[Any, int] = {}
_live_lock = threading.Lock()


def _forget_owners_after_fork() -> None:
    global _live_lock
    _live_lock = threading.Lock()
    _live_owners.clear()


os.register_at_fork(after_in_child=_forget_owners_after_fork)


def owner_id(factory: Any) -> Any:
    if not isinstance(factory, StoreFactory):
        return None
    ident = (factory.store_config.name, factory.key)
    try:
        hash(ident)
    except TypeError:
        return None
    return ident


def owner_born(factory: Any) -> None:
    ident = owner_id(factory)
    if ident is not None:
        with _live_lock:
            _live_owners[ident] = _live_owners.get(ident, 0) + 1


def owner_gone(factory: Any) -> bool:
    """Forget one live owner; return whether it was the last (so the object may go)."""
    ident = owner_id(factory)
    if ident is None:
        return True
    with _live_lock:
        count = _live_owners.get(ident, 1) - 1
        if count > 0:
            _live_owners[ident] = count
            return False
        _live_owners.pop(ident, None)
        return True


def describe(proxy: Proxy[Any]) -> str:
    factory = get_factory(proxy)
    if isinstance(factory, StoreFactory):
        return (
            f'{type(proxy).__name__} of key {factory.key!r} in store {factory.store_config.name!r}'
        )
    return type(proxy).__name__


def store_of(proxy: Proxy[Any], what: str) -> Store[Any]:
    return get_store_factory(proxy, what).get_store()


def evict_target(proxy: Proxy[Any]) -> None:
    try:
        factory = get_factory(proxy)
        if isinstance(factory, StoreFactory):
            if factory.origin_closed():
                # The store that made it here was closed: its objects were left with
                # it. Rebuilding (and registering) a store just to evict would leave a
                # store registered behind the program's back.
                return
            store = factory.current_store()
            if store is None:
                # Not in this process (an owner moved here): build one to evict with,
                # without registering it, and close it again.
                built = get_or_create_store(factory.store_config, register=False)
                try:
                    built.evict(factory.key)
                finally:
                    if registered_store(built.name) is not built:
                        built.close()
            elif not store.closed:
                store.evict(factory.key)
    except Exception:  # pragma: no cover - backend gone, interpreter shutdown
        if sys.is_finalizing():
            return  # modules are being torn down: nothing more can be reached
        logger.exception('could not evict the object of %s', describe(proxy))


def refuse_copy(proxy: Proxy[Any]) -> NoReturn:
    raise OwnerCopyError(
        f'cannot copy {describe(proxy)}: a copy would be a second owner that evicts the '
        'object under the first; use clone(proxy) for a new object with its own owner, '
        'or borrow(proxy) to share it',
    )


def check_state(proxy: Proxy[Any], state: OwnerState, what: str) -> None:
    if state.moved:
        raise ReferenceInvalidError(
            f'cannot {what} {describe(proxy)}: its ownership was moved to another process '
            '(it was pickled); use the copy that was sent',
        )
    if state.dropped:
        raise ReferenceInvalidError(f'cannot {what} {describe(proxy)}: it was dropped')


def refuse_write(proxy: Proxy[Any]) -> None:
    raise OwnershipError(
        f'{describe(proxy)} is a shared borrow and is read-only: use mut_borrow() on the '
        'owner to get a mutable borrow',
    )
