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

import copy
import inspect
import logging
import os
from typing import TYPE_CHECKING, Any, TypeVar, cast

from tether.exceptions import (
    AlreadyOwnedError,
    MutableBorrowError,
    NotAStoreProxyError,
    OwnershipError,
    ReferenceInvalidError,
    ReferenceNotOwnedError,
)
from tether.proxy import (
    LOCAL_NAMES,
    MISSING,
    Proxy,
    extract,
    get_factory,
    get_metadata,
    is_resolved,
    set_metadata,
    set_target,
)
from tether.store._ref_state import (
    OwnerState,
    RefState,
    check_state,
    describe,
    evict_target,
    owner_born,
    owner_gone,
    refuse_copy,
    refuse_write,
    store_of,
)
from tether.store.factory import StoreFactory
from tether.store.utils import get_store_factory

if TYPE_CHECKING:
    pass

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
    'end_borrow',
    'into_owned',
    'mut_borrow',
    'update',
]

BaseRefProxyError = OwnershipError
"""ProxyStore's name for the base of the ownership errors."""

logger = logging.getLogger(__name__)

T = TypeVar('T')


class BaseRefProxy(Proxy[T]):
    """Base class of the ownership proxies (they are store proxies with extra state).

    Every use of an ownership proxy that is no longer valid (an owner that was moved or
    dropped, a borrow that ended or was sent to another process) raises
    :class:`~tether.exceptions.OwnershipError`: attribute access, operators, ``len``,
    iteration, comparisons, hashing, ``str`` alike. ``repr``, ``type``, ``isinstance``
    and pickling a moved owner again stay available.
    """

    __slots__ = ('__ownership__',)

    def __init__(
        self,
        factory: StoreFactory[T],
        *,
        target_class: type | None = None,
        target: Any = MISSING,
        cache_defaults: bool = False,
    ):
        Proxy.__init__(
            self,
            factory,
            target_class=target_class,
            target=target,
            cache_defaults=cache_defaults,
        )
        type(self)._born(self, factory)

    @staticmethod
    def _born(proxy: Any, factory: StoreFactory[Any]) -> None:
        """Set up a new proxy's ownership state (an owner's; a borrow sets its own)."""

    def __getattribute__(self, name: str) -> Any:
        if name not in LOCAL_NAMES:
            _check_valid(self, f'access {name!r} on')
        return Proxy.__getattribute__(self, name)

    def __deepcopy__(self, memo: dict[int, Any]) -> Proxy[T]:
        # Nothing to copy deeply: the object stays in the store, so a deep copy is a copy
        # (another counted borrow; refused for an owner).
        return type(self).__copy__(self)

    # Writes to the target: each kind checks first (_check_write) whether it may write
    # now (an owner while not borrowed, a mutable borrow while valid, a shared one never).

    @staticmethod
    def _check_write(proxy: Any) -> None:
        raise NotImplementedError

    def __setattr__(self, name: str, value: Any) -> None:
        type(self)._check_write(self)
        Proxy.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        type(self)._check_write(self)
        Proxy.__delattr__(self, name)

    def __setitem__(self, key: Any, value: Any) -> None:
        type(self)._check_write(self)
        Proxy.__setitem__(self, key, value)

    def __delitem__(self, key: Any) -> None:
        type(self)._check_write(self)
        Proxy.__delitem__(self, key)


_get_state = vars(BaseRefProxy)['__ownership__'].__get__
_set_state = vars(BaseRefProxy)['__ownership__'].__set__

# Special methods that stay usable on an invalidated ownership proxy.
_UNCHECKED = frozenset(
    (
        '__init__',
        '__getattribute__',
        '__reduce__',
        '__reduce_ex__',
        '__copy__',
        '__deepcopy__',
        '__dask_tokenize__',
        '__repr__',
        '__sizeof__',
    ),
)


def _checked(name: str, method: Any) -> Any:
    def wrapper(self: BaseRefProxy[Any], *args: Any, **kwargs: Any) -> Any:
        _check_valid(self, f'use {name} on')
        return method(self, *args, **kwargs)

    wrapper.__name__ = name
    wrapper.__qualname__ = f'BaseRefProxy.{name}'
    wrapper.__doc__ = method.__doc__
    return wrapper


for _name, _method in list(vars(Proxy).items()):
    if (
        _name.startswith('__')
        and _name.endswith('__')
        and _name not in _UNCHECKED
        and _name not in vars(BaseRefProxy)  # its own: the writes check _check_write
        and inspect.isfunction(_method)
    ):
        setattr(BaseRefProxy, _name, _checked(_name, _method))


def _check_valid(proxy: BaseRefProxy[Any], what: str) -> None:
    """Raise ``OwnershipError`` if ``proxy`` was moved, dropped, sent or has ended."""
    state = _get_state(proxy)
    if type(state) is OwnerState:
        if state.moved or state.dropped:
            check_state(proxy, state, what)
        return
    if state.ended:
        raise ReferenceInvalidError(
            f'cannot {what} {describe(proxy)}: the borrow has ended (the task it was '
            'passed to finished); borrow the owner again',
        )
    if state.sent:
        raise ReferenceInvalidError(
            f'cannot {what} {describe(proxy)}: the borrow was sent to another process '
            '(it was pickled); use the copy that was sent, or borrow the owner again',
        )


def _copy_metadata(src: Proxy[Any], dst: Proxy[Any]) -> None:
    """Give ``dst`` the metadata of ``src``, and its target if ``src`` is resolved."""
    set_metadata(dst, get_metadata(src))
    if is_resolved(src):
        set_target(dst, extract(src))


_RefT = TypeVar('_RefT', bound='RefProxy[Any]')


def _new_ref(
    cls: type[_RefT],
    owner: OwnedProxy[Any],
    state: Any,
    populate_target: bool,
) -> _RefT:
    """A borrow of ``owner`` (its factory and class; its target too if populated)."""
    ref = cls(
        cast(StoreFactory[Any], get_factory(owner)),
        target_class=get_metadata(owner).target_class,
        owner=state,
        owner_proxy=owner,
    )
    if populate_target:
        _copy_metadata(owner, ref)
    return ref


class OwnedProxy(BaseRefProxy[T]):
    """The one owner of an object in a store; evicts it when it goes out of scope."""

    __slots__ = ()

    @staticmethod
    def _born(proxy: Any, factory: StoreFactory[Any]) -> None:
        _set_state(proxy, OwnerState())
        owner_born(factory)

    def __copy__(self) -> OwnedProxy[T]:
        refuse_copy(self)

    @staticmethod
    def _check_write(proxy: Any) -> None:
        _check_mutable(proxy)

    def __reduce__(self) -> tuple[Any, ...]:
        state: OwnerState = _get_state(self)
        with state.lock:
            if state.dropped:
                check_state(self, state, 'move')
            # Pickling a moved owner again is allowed: engines may serialize one message
            # twice (Dask retries with cloudpickle) and send only one of the copies.
            if state.refs or state.mut:
                raise OwnershipError(
                    f'cannot move {describe(self)} to another process while it is borrowed '
                    f'{_borrows(state)}; wait for the borrowing tasks, or pass '
                    'borrow(proxy) / clone(proxy) instead',
                )
            first_move = not state.moved
            state.moved = True
        if first_move:
            owner_gone(get_factory(self))
        return Proxy.__reduce__(self)

    def __del__(self) -> None:
        try:
            state: OwnerState = _get_state(self)
        except AttributeError:  # pragma: no cover - half-built object
            return
        if state.moved or state.dropped or state.pid != os.getpid():
            return
        if state.refs or state.mut:
            state.dropped = True
            owner_gone(get_factory(self))
            raise OwnershipError(
                f'{describe(self)} went out of scope while borrowed {_borrows(state)}; the '
                'object is kept so the borrows stay valid: keep the owner alive until the '
                'borrowing tasks finish',
            )
        state.dropped = True
        if owner_gone(get_factory(self)):
            evict_target(self)


class RefProxy(BaseRefProxy[T]):
    """A shared, read-only borrow of an :class:`OwnedProxy`'s object."""

    __slots__ = ()

    def __init__(
        self,
        factory: StoreFactory[T],
        *,
        target_class: type | None = None,
        owner: OwnerState | None = None,
        owner_proxy: Any = None,
    ):
        super().__init__(factory, target_class=target_class)
        _set_state(self, RefState(owner, owner_proxy))

    @staticmethod
    def _check_write(proxy: Any) -> None:
        refuse_write(proxy)

    def __reduce__(self) -> tuple[Any, ...]:
        state: RefState = _get_state(self)
        if state.ended:
            _check_valid(self, 'send')
        # Sending the borrow hands it to the receiver: this local object is not usable
        # any more (sending it again is allowed, as for owners), but it keeps counting
        # as a borrow of the owner until it ends.
        if state.owner is not None:
            state.sent = True
        return Proxy.__reduce__(self)

    def __copy__(self) -> RefProxy[T]:
        return _copy_ref(self)

    def __del__(self) -> None:
        try:
            end_borrow(self)
        except Exception:  # pragma: no cover - interpreter shutdown
            return


class RefMutProxy(RefProxy[T]):
    """The one mutable borrow of an :class:`OwnedProxy`'s object."""

    __slots__ = ()

    @staticmethod
    def _check_write(proxy: Any) -> None:
        _check_valid(proxy, 'mutate')


def _copy_ref(ref: RefProxy[Any]) -> RefProxy[Any]:
    """``copy.copy`` of a borrow: another borrow of the same owner (counted)."""
    state: RefState = _get_state(ref)
    _check_valid(ref, 'copy')
    if state.owner is None:
        # A borrow received from another process: its copy is another such borrow.
        copied = type(ref)(cast(StoreFactory[Any], get_factory(ref)))
        _copy_metadata(ref, copied)
        return copied
    if type(ref) is RefMutProxy:
        raise OwnershipError(
            f'cannot copy {describe(ref)}: there is one mutable borrow at a time',
        )
    owner = state.owner_proxy
    if owner is None:  # pragma: no cover - a live, not ended borrow keeps its owner
        check_state(ref, state.owner, 'copy')
    return borrow(owner, populate_target=is_resolved(ref))


def _borrows(state: OwnerState) -> str:
    """How an owner is borrowed, for the errors."""
    return f'({state.refs} shared, {int(state.mut)} mutable borrows)'


def _check_unborrowed(proxy: OwnedProxy[Any], state: OwnerState, what: str) -> None:
    """Raise ``MutableBorrowError`` if the owner ``proxy`` may not ``what``: it is
    moved, dropped or borrowed."""
    check_state(proxy, state, what)
    if state.refs or state.mut:
        raise MutableBorrowError(
            f'cannot {what} {describe(proxy)} while it is borrowed {_borrows(state)}',
        )


def _check_mutable(proxy: OwnedProxy[Any]) -> None:
    _check_unborrowed(proxy, _get_state(proxy), 'mutate')


def _owner_state(proxy: Any, fn: str) -> OwnerState:
    # type(), not isinstance(): isinstance would resolve a plain proxy of unknown class.
    if not issubclass(type(proxy), OwnedProxy):
        raise ReferenceNotOwnedError(
            f'{fn}() needs an OwnedProxy, got {type(proxy).__name__} '
            '(make one with store.owned_proxy() or into_owned())',
        )
    return cast(OwnerState, _get_state(proxy))


def end_borrow(ref: RefProxy[Any]) -> None:
    """End a borrow now, as when it is garbage collected (no error if it has ended).

    :func:`tether.store.scopes.submit` and the store executor call it when the task the
    borrow was passed to has finished. The borrow is unusable afterwards.
    """
    state: RefState = _get_state(ref)
    owner = state.owner
    if state.released or owner is None:
        return
    with owner.lock:
        if state.released:
            return
        state.released = True
        state.ended = True
        if type(ref) is RefMutProxy:
            owner.mut = False
        else:
            owner.refs = max(0, owner.refs - 1)
    # May drop the last reference to the owner, which then evicts the object.
    state.owner_proxy = None


def borrow(proxy: OwnedProxy[T], *, populate_target: bool = True) -> RefProxy[T]:
    """Return a shared, read-only borrow of the owner's object.

    Raises:
        OwnershipError: if ``proxy`` is not an owner, was moved or dropped, or is
            mutably borrowed.
    """
    state = _owner_state(proxy, 'borrow')
    with state.lock:
        check_state(proxy, state, 'borrow')
        if state.mut:
            raise MutableBorrowError(
                f'cannot borrow {describe(proxy)}: it is mutably borrowed (a RefMutProxy '
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
        check_state(proxy, state, 'mutably borrow')
        if state.refs or state.mut:
            raise MutableBorrowError(
                f'cannot mutably borrow {describe(proxy)}: it is already borrowed '
                f'{_borrows(state)}',
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
    check_state(proxy, state, 'clone')
    if state.mut:
        raise MutableBorrowError(f'cannot clone {describe(proxy)} while it is mutably borrowed')
    obj = extract(proxy)
    owned = store_of(proxy, 'clone()').owned_proxy(
        obj, skip_nonproxiable=False, populate_target=False
    )
    try:
        # The clone's target is a copy: mutating it must not change the original.
        set_target(owned, copy.deepcopy(obj))
    except Exception:
        logger.debug('clone of %s resolves from the store (no deepcopy)', describe(proxy))
    return owned


def into_owned(proxy: Proxy[T], *, populate_target: bool = True) -> OwnedProxy[T]:
    """Turn a plain store proxy into the owner of its object.

    With ``populate_target`` (the default) the owner shares the proxy's target if that
    is resolved; with ``False`` the owner starts unresolved.

    Does not resolve ``proxy``. If another live owner of the same object exists in this
    process, the object stays until the last of them ends.

    Raises:
        OwnershipError: if ``proxy`` is already an ownership proxy.
        NotAStoreProxyError: if it is not a store proxy (a ``StoreError``, ``TypeError``).
    """
    kind = type(proxy)
    if not issubclass(kind, Proxy):
        raise NotAStoreProxyError(f'into_owned() needs a store proxy, got {kind.__name__}')
    if issubclass(kind, BaseRefProxy):
        raise AlreadyOwnedError(
            f'into_owned() needs a plain store proxy, got a {type(proxy).__name__} '
            '(borrows cannot become owners; clone() the owner instead)',
        )
    factory = get_store_factory(proxy, 'into_owned()')
    owned_factory: StoreFactory[T] = StoreFactory(
        factory.key,
        factory.store_config,
        deserializer=factory.deserializer,
        store=factory.get_store(),
    )
    owned: OwnedProxy[T] = OwnedProxy(owned_factory)
    set_metadata(owned, get_metadata(proxy))
    if populate_target and is_resolved(proxy):
        set_target(owned, extract(proxy))
    return owned


def update(proxy: OwnedProxy[Any] | RefMutProxy[Any]) -> None:
    """Write the (locally changed) target back to the store, under the same key.

    Raises:
        OwnershipError: for a shared borrow, or an owner that is borrowed, moved or
            dropped.
        StoreError: if the store's connector cannot overwrite a key (not deferrable).
    """
    if issubclass(type(proxy), OwnedProxy):
        _check_mutable(cast(OwnedProxy[Any], proxy))
    elif issubclass(type(proxy), RefMutProxy):
        _check_valid(proxy, 'update')
    else:
        raise ReferenceNotOwnedError(
            f'update() needs an OwnedProxy or a RefMutProxy, got {type(proxy).__name__}',
        )
    if not is_resolved(proxy):
        return
    factory = get_store_factory(proxy, 'update()')
    store = factory.get_store()
    deferrable = store.capabilities.require_deferrable(
        'overwrite objects', f'store {store.name!r}'
    )
    key = factory.key
    deferrable.set(key, store.serialize(extract(proxy)))
    store.cache.evict(key)


def drop(proxy: OwnedProxy[Any]) -> None:
    """Evict the owner's object now (what going out of scope does), raising on misuse.

    Raises:
        OwnershipError: if ``proxy`` is borrowed, moved or already dropped.
    """
    state = _owner_state(proxy, 'drop')
    with state.lock:
        _check_unborrowed(proxy, state, 'drop')
        state.dropped = True
    if state.pid == os.getpid() and owner_gone(get_factory(proxy)):
        evict_target(proxy)
