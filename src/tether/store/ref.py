"""Ownership and borrowing for store proxies, after Rust's rules, enforced at run time.

* :class:`OwnedProxy` (from :meth:`Store.owned_proxy <tether.store.Store.owned_proxy>` or
  :func:`into_owned`): the one owner of an object. When it goes out of scope (is garbage
  collected) or is :func:`drop`-ped, the object is evicted from the store. Sending it to
  another process (pickling it) *moves* ownership: the receiver becomes the owner and the
  sender's copy becomes unusable and never evicts.
* :class:`RefProxy` (from :func:`borrow`): a shared, read-only borrow. Any number may
  exist at a time. Assigning attributes or items through it raises.
* :class:`RefMutProxy` (from :func:`mut_borrow`): the one mutable borrow; no shared
  borrow may exist at the same time. Push changes to the store with :func:`update`.

While borrowed, the owner cannot be dropped (:func:`drop`), moved, updated or mutated
through attribute or item assignment: each raises
:class:`~tether.exceptions.OwnershipError`. A live borrow keeps its owner alive, so an
owner that goes out of scope while borrowed is evicted when the last borrow ends, not
before. (Should an owner still be collected while counted as borrowed, the error is
reported through :data:`sys.unraisablehook` and the object is kept.)

A borrow ends when the local borrow object is garbage collected, or, for borrows passed to
tasks, when the task's future completes (:func:`tether.store.scopes.submit` arranges it).
Method calls that mutate the target in place (``lst.append``) cannot be intercepted; push
them with :func:`update` from the owner or a mutable borrow.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, TypeVar, cast

from tether.exceptions import (
    AlreadyOwnedError,
    MissingCapabilityError,
    MutableBorrowError,
    OwnershipError,
    ReferenceInvalidError,
    ReferenceNotOwnedError,
    StoreError,
)
from tether.proxy import (
    _LOCAL_NAMES,
    Proxy,
    _get_class,
    _get_factory,
    _get_hash,
    _get_target,
    _set_target_metadata,
    extract,
    get_factory,
    is_resolved,
)
from tether.proxy import _MISSING as _MISSING_TARGET
from tether.store.factory import StoreFactory

if TYPE_CHECKING:
    from tether.serialize import Deserializer, Serializer
    from tether.store._store import Store

__all__ = [
    'BaseRefProxy',
    'BaseRefProxyError',
    'MutableBorrowError',
    'OwnedProxy',
    'RefMutProxy',
    'RefProxy',
    'ReferenceInvalidError',
    'ReferenceNotOwnedError',
    'borrow',
    'clone',
    'drop',
    'into_owned',
    'mut_borrow',
    'update',
]

BaseRefProxyError = OwnershipError
"""ProxyStore's name for the base of the ownership errors."""

logger = logging.getLogger(__name__)

T = TypeVar('T')

_MISSING: Any = object()


class _OwnerState:
    __slots__ = ('dropped', 'lock', 'moved', 'mut', 'refs')

    def __init__(self) -> None:
        self.refs = 0
        self.mut = False
        self.moved = False
        self.dropped = False
        self.lock = threading.Lock()


class _RefState:
    __slots__ = ('owner', 'owner_proxy', 'released')

    def __init__(self, owner: _OwnerState | None, owner_proxy: Any = None) -> None:
        self.owner = owner
        # A live local borrow keeps its owner alive (so the owner is not collected while
        # borrowed); the reference is dropped when the borrow ends.
        self.owner_proxy = owner_proxy
        self.released = owner is None


class BaseRefProxy(Proxy[T]):
    """Base class of the ownership proxies (they are store proxies with extra state)."""

    __slots__ = ('__ownership__',)

    def __init__(self, factory: StoreFactory[T], *, target_class: type | None = None):
        Proxy.__init__(self, factory, target_class=target_class)


_get_state = cast(Any, BaseRefProxy.__ownership__).__get__  # type: ignore[attr-defined]
_set_state = cast(Any, BaseRefProxy.__ownership__).__set__  # type: ignore[attr-defined]


def _describe(proxy: Proxy[Any]) -> str:
    factory = _get_factory(proxy)
    if isinstance(factory, StoreFactory):
        return (
            f'{type(proxy).__name__} of key {factory.key!r} in store {factory.store_config.name!r}'
        )
    return type(proxy).__name__


def _copy_metadata(src: Proxy[Any], dst: Proxy[Any]) -> None:
    target = _get_target(src)
    _set_target_metadata(dst, target, _get_hash(src))


_RefT = TypeVar('_RefT', bound='RefProxy[Any]')


def _new_ref(
    cls: type[_RefT],
    owner: OwnedProxy[Any],
    state: Any,
    populate_target: bool,
) -> _RefT:
    """A borrow of ``owner`` (its factory and class; its target too if populated)."""
    ref = cls(
        cast(StoreFactory[Any], _get_factory(owner)),
        target_class=_get_class(owner),
        owner=state,
        owner_proxy=owner,
    )
    if populate_target:
        _copy_metadata(owner, ref)
    return ref


class OwnedProxy(BaseRefProxy[T]):
    """The one owner of an object in a store; evicts it when it goes out of scope."""

    __slots__ = ()

    def __init__(self, factory: StoreFactory[T], *, target_class: type | None = None):
        super().__init__(factory, target_class=target_class)
        _set_state(self, _OwnerState())

    def __getattribute__(self, name: str) -> Any:
        if name not in _LOCAL_NAMES:
            _check_usable(self, f'access {name!r} on')
        return Proxy.__getattribute__(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        _check_mutable(self)
        Proxy.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        _check_mutable(self)
        Proxy.__delattr__(self, name)

    def __setitem__(self, key: Any, value: Any) -> None:
        _check_mutable(self)
        Proxy.__setitem__(self, key, value)

    def __delitem__(self, key: Any) -> None:
        _check_mutable(self)
        Proxy.__delitem__(self, key)

    def __reduce__(self) -> tuple[Any, ...]:
        state: _OwnerState = _get_state(self)
        with state.lock:
            if state.dropped:
                _check_state(self, state, 'move')
            # Pickling a moved owner again is allowed: engines may serialize one message
            # twice (Dask retries with cloudpickle) and send only one of the copies.
            if state.refs or state.mut:
                raise OwnershipError(
                    f'cannot move {_describe(self)} to another process while it is borrowed '
                    f'({state.refs} shared, {int(state.mut)} mutable borrows); wait for the '
                    'borrowing tasks, or pass borrow(proxy) / clone(proxy) instead',
                )
            state.moved = True
        return (_rebuild, (OwnedProxy, _get_factory(self), _picklable_class(self), _hash(self)))

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return self.__reduce__()

    def __del__(self) -> None:
        try:
            state: _OwnerState = _get_state(self)
        except AttributeError:  # pragma: no cover - half-built object
            return
        if state.moved or state.dropped:
            return
        if state.refs or state.mut:
            state.dropped = True
            raise OwnershipError(
                f'{_describe(self)} went out of scope while borrowed ({state.refs} shared, '
                f'{int(state.mut)} mutable borrows); the object is kept so the borrows stay '
                'valid: keep the owner alive until the borrowing tasks finish',
            )
        state.dropped = True
        _evict_target(self)


class RefProxy(BaseRefProxy[T]):
    """A shared, read-only borrow of an :class:`OwnedProxy`'s object."""

    __slots__ = ()

    def __init__(
        self,
        factory: StoreFactory[T],
        *,
        target_class: type | None = None,
        owner: _OwnerState | None = None,
        owner_proxy: Any = None,
    ):
        super().__init__(factory, target_class=target_class)
        _set_state(self, _RefState(owner, owner_proxy))

    def __setattr__(self, name: str, value: Any) -> None:
        _read_only(self)

    def __delattr__(self, name: str) -> None:
        _read_only(self)

    def __setitem__(self, key: Any, value: Any) -> None:
        _read_only(self)

    def __delitem__(self, key: Any) -> None:
        _read_only(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), _get_factory(self), _picklable_class(self), _hash(self)))

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return self.__reduce__()

    def __del__(self) -> None:
        try:
            _release(self)
        except Exception:  # pragma: no cover - interpreter shutdown
            return


class RefMutProxy(RefProxy[T]):
    """The one mutable borrow of an :class:`OwnedProxy`'s object."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        Proxy.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        Proxy.__delattr__(self, name)

    def __setitem__(self, key: Any, value: Any) -> None:
        Proxy.__setitem__(self, key, value)

    def __delitem__(self, key: Any) -> None:
        Proxy.__delitem__(self, key)


def _picklable_class(proxy: Proxy[Any]) -> type | None:
    cls = _get_class(proxy)
    if cls is None:
        target = _get_target(proxy)
        if target is not _MISSING_TARGET:
            cls = type(target)
    if cls is not None and '<locals>' in getattr(cls, '__qualname__', '<locals>'):
        return None
    return cast(type | None, cls)


def _hash(proxy: Proxy[Any]) -> Any:
    return _get_hash(proxy)


def _rebuild(
    cls: type[BaseRefProxy[Any]],
    factory: StoreFactory[Any],
    target_class: type | None,
    h: Any,
) -> BaseRefProxy[Any]:
    proxy = cls(factory, target_class=target_class)
    _set_target_metadata(proxy, _MISSING_TARGET, h)
    return proxy


def _check_state(proxy: Proxy[Any], state: _OwnerState, what: str) -> None:
    if state.moved:
        raise ReferenceInvalidError(
            f'cannot {what} {_describe(proxy)}: its ownership was moved to another process '
            '(it was pickled); use the copy that was sent',
        )
    if state.dropped:
        raise ReferenceInvalidError(f'cannot {what} {_describe(proxy)}: it was dropped')


def _check_usable(proxy: OwnedProxy[Any], what: str) -> None:
    state: _OwnerState = _get_state(proxy)
    if state.moved or state.dropped:
        _check_state(proxy, state, what)


def _check_mutable(proxy: OwnedProxy[Any]) -> None:
    state: _OwnerState = _get_state(proxy)
    _check_state(proxy, state, 'mutate')
    if state.refs or state.mut:
        raise MutableBorrowError(
            f'cannot mutate {_describe(proxy)} while it is borrowed ({state.refs} shared, '
            f'{int(state.mut)} mutable borrows)',
        )


def _read_only(proxy: RefProxy[Any]) -> None:
    raise OwnershipError(
        f'{_describe(proxy)} is a shared borrow and is read-only: use mut_borrow() on the '
        'owner to get a mutable borrow',
    )


def _owner_state(proxy: Any, fn: str) -> _OwnerState:
    if not isinstance(proxy, OwnedProxy):
        raise ReferenceNotOwnedError(
            f'{fn}() needs an OwnedProxy, got {type(proxy).__name__} '
            '(make one with store.owned_proxy() or into_owned())',
        )
    return cast(_OwnerState, _get_state(proxy))


def _store_of(proxy: Proxy[Any]) -> Store[Any]:
    factory = get_factory(proxy)
    if not isinstance(factory, StoreFactory):
        raise StoreError(f'{type(proxy).__name__} is not a store proxy (factory {factory!r})')
    return factory.get_store()


def _evict_target(proxy: Proxy[Any]) -> None:
    try:
        factory = get_factory(proxy)
        if isinstance(factory, StoreFactory):
            store = factory.get_store()
            if not store.closed:
                store.evict(factory.key)
    except Exception:  # pragma: no cover - backend gone, interpreter shutdown
        logger.exception('could not evict the object of %s', _describe(proxy))


def _release(ref: RefProxy[Any]) -> None:
    """End a borrow now (used when the task it was passed to has finished)."""
    state: _RefState = _get_state(ref)
    owner = state.owner
    if state.released or owner is None:
        return
    with owner.lock:
        if state.released:
            return
        state.released = True
        if isinstance(ref, RefMutProxy):
            owner.mut = False
        else:
            owner.refs = max(0, owner.refs - 1)
    # May drop the last reference to the owner, which then evicts the object.
    state.owner_proxy = None


def _make_owned(
    store: Store[Any],
    obj: T,
    *,
    serializer: Serializer | None = None,
    deserializer: Deserializer | None = None,
    populate_target: bool | None = None,
    **kwargs: Any,
) -> OwnedProxy[T]:
    """Store ``obj`` and return its :class:`OwnedProxy` (see :meth:`Store.owned_proxy`)."""
    key = store.put(obj, serializer=serializer, **kwargs)
    proxy = store._make_proxy(
        obj, key, False, deserializer, populate_target, proxy_type=OwnedProxy
    )
    return cast(OwnedProxy[T], proxy)


def borrow(proxy: OwnedProxy[T], *, populate_target: bool = True) -> RefProxy[T]:
    """Return a shared, read-only borrow of the owner's object.

    Raises:
        OwnershipError: if ``proxy`` is not an owner, was moved or dropped, or is
            mutably borrowed.
    """
    state = _owner_state(proxy, 'borrow')
    with state.lock:
        _check_state(proxy, state, 'borrow')
        if state.mut:
            raise MutableBorrowError(
                f'cannot borrow {_describe(proxy)}: it is mutably borrowed (a RefMutProxy '
                'exists); wait until that borrow ends',
            )
        state.refs += 1
    return _new_ref(RefProxy, proxy, state, populate_target)


def mut_borrow(proxy: OwnedProxy[T], *, populate_target: bool = True) -> RefMutProxy[T]:
    """Return the one mutable borrow of the owner's object.

    Raises:
        OwnershipError: if ``proxy`` is not an owner, was moved or dropped, or is
            already borrowed (shared or mutably).
    """
    state = _owner_state(proxy, 'mut_borrow')
    with state.lock:
        _check_state(proxy, state, 'mutably borrow')
        if state.refs or state.mut:
            raise MutableBorrowError(
                f'cannot mutably borrow {_describe(proxy)}: it is already borrowed '
                f'({state.refs} shared, {int(state.mut)} mutable borrows)',
            )
        state.mut = True
    return _new_ref(RefMutProxy, proxy, state, populate_target)


def clone(proxy: OwnedProxy[T]) -> OwnedProxy[T]:
    """Copy the owner's object into a new object in the store, with its own owner.

    Raises:
        OwnershipError: if ``proxy`` is not an owner, was moved or dropped, or is
            mutably borrowed.
    """
    state = _owner_state(proxy, 'clone')
    _check_state(proxy, state, 'clone')
    if state.mut:
        raise MutableBorrowError(f'cannot clone {_describe(proxy)} while it is mutably borrowed')
    return _make_owned(_store_of(proxy), extract(proxy))


def into_owned(proxy: Proxy[T], *, populate_target: bool = True) -> OwnedProxy[T]:
    """Turn a plain store proxy into the owner of its object.

    With ``populate_target`` (the default) the owner shares the proxy's target if that
    is resolved; with ``False`` the owner starts unresolved.

    Raises:
        OwnershipError: if ``proxy`` is already an ownership proxy.
        StoreError: if it is not a store proxy.
    """
    if isinstance(proxy, BaseRefProxy):
        raise AlreadyOwnedError(
            f'into_owned() needs a plain store proxy, got a {type(proxy).__name__} '
            '(borrows cannot become owners; clone() the owner instead)',
        )
    factory = get_factory(proxy)
    if not isinstance(factory, StoreFactory):
        raise StoreError(f'into_owned() needs a store proxy, got factory {factory!r}')
    owned_factory: StoreFactory[T] = StoreFactory(
        factory.key,
        factory.store_config,
        deserializer=factory.deserializer,
        store=factory.get_store(),
    )
    owned: OwnedProxy[T] = OwnedProxy(owned_factory, target_class=_get_class(proxy))
    if populate_target:
        _copy_metadata(proxy, owned)
    else:
        _set_target_metadata(owned, _MISSING_TARGET, _get_hash(proxy))
    return owned


def update(proxy: OwnedProxy[Any] | RefMutProxy[Any]) -> None:
    """Write the (locally changed) target back to the store, under the same key.

    Raises:
        OwnershipError: for a shared borrow, or an owner that is borrowed, moved or
            dropped.
        StoreError: if the store's connector cannot overwrite a key (not deferrable).
    """
    if isinstance(proxy, OwnedProxy):
        _check_mutable(proxy)
    elif not isinstance(proxy, RefMutProxy):
        raise ReferenceNotOwnedError(
            f'update() needs an OwnedProxy or a RefMutProxy, got {type(proxy).__name__}',
        )
    if not is_resolved(proxy):
        return
    factory = get_factory(proxy)
    store = _store_of(proxy)
    setter = getattr(store.connector, 'set', None)
    if setter is None:
        raise MissingCapabilityError(
            f'store {store.name!r} ({store.connector!r}) cannot overwrite objects: its '
            'connector has no set()',
        )
    key = cast(StoreFactory[Any], factory).key
    setter(key, store.serialize(extract(proxy)))
    store.cache.evict(key)


def drop(proxy: OwnedProxy[Any]) -> None:
    """Evict the owner's object now (what going out of scope does), raising on misuse.

    Raises:
        OwnershipError: if ``proxy`` is borrowed, moved or already dropped.
    """
    state = _owner_state(proxy, 'drop')
    with state.lock:
        _check_state(proxy, state, 'drop')
        if state.refs or state.mut:
            raise MutableBorrowError(
                f'cannot drop {_describe(proxy)} while it is borrowed ({state.refs} shared, '
                f'{int(state.mut)} mutable borrows)',
            )
        state.dropped = True
    _evict_target(proxy)
