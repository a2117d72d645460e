"""Lifetimes: scopes that evict the objects attached to them when they end.

Attach objects with ``store.put(obj, lifetime=lt)``, ``store.proxy(obj, lifetime=lt)`` or
:meth:`Lifetime.add_key`/:meth:`Lifetime.add_proxy`; when the lifetime ends, every one of
them is evicted from its store.

* :class:`ContextLifetime`: ends when its ``with`` block exits (or on
  :meth:`~ContextLifetime.close`).
* :class:`LeaseLifetime`: ends ``expiry`` seconds from now unless :meth:`extended
  <LeaseLifetime.extend>`; one timer thread per lease.
* :class:`StaticLifetime`: ends when the program exits (a process-wide singleton).

::

    with ContextLifetime(store) as lifetime:
        key = store.put('value', lifetime=lifetime)
    assert not store.exists(key)
"""

from __future__ import annotations

import atexit
import datetime
import inspect
import logging
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from tether._clock import SYSTEM_CLOCK, Clock
from tether._closing import ClosingContext
from tether.exceptions import LifetimeArgumentError, LifetimeError
from tether.proxy import Proxy
from tether.store.utils import get_store_factory

if TYPE_CHECKING:
    from tether.store._store import Store

__all__ = [
    'ContextLifetime',
    'LeaseLifetime',
    'Lifetime',
    'StaticLifetime',
    'register_lifetime_atexit',
]

logger = logging.getLogger(__name__)


@runtime_checkable
class Lifetime(Protocol):
    """What the store needs of a lifetime."""

    def add_key(self, *keys: Any, store: Store[Any] | None = None) -> None:
        """Attach objects of ``store`` to the lifetime, by key."""
        ...

    def add_proxy(self, *proxies: Proxy[Any]) -> None:
        """Attach the objects behind store proxies to the lifetime."""
        ...

    def close(self) -> None:
        """End the lifetime now, evicting its objects."""
        ...

    def done(self) -> bool:
        """Return whether the lifetime has ended."""
        ...


class ContextLifetime(ClosingContext):
    """A lifetime that ends when its ``with`` block exits, or when :meth:`close` is called.

    Args:
        store: The store whose objects this lifetime evicts (``add_key`` without a store
            uses it; with ``None``, every ``add_key`` names its store).
        name: A name for logs (default: a random one).
    """

    def __init__(self, store: Store[Any] | None, *, name: str | None = None) -> None:
        self.store = store
        self.name = name or f'lifetime-{uuid.uuid4().hex[:8]}'
        self._keys: list[tuple[Store[Any], Any]] = []
        self._done = False  # ending has begun: no more keys, no extension
        self._ended = threading.Event()  # set once its objects are evicted
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f'{type(self).__name__}({self.name!r}, objects={len(self._keys)}, done={self._done})'
        )

    def add_key(self, *keys: Any, store: Store[Any] | None = None) -> None:
        """Attach objects, by key, to this lifetime.

        Raises:
            LifetimeError: if the lifetime has already ended (the objects are evicted at
                once so nothing leaks).
            LifetimeArgumentError: without ``store`` on a lifetime made without one.
        """
        target = self.store if store is None else store
        if target is None:
            raise LifetimeArgumentError(
                f'{self!r} has no store of its own: pass the store of the keys, store=...',
            )
        with self._lock:
            if not self._done:
                self._keys.extend((target, k) for k in keys)
                return
        _evict_all([(target, k) for k in keys], self)
        raise LifetimeError(
            f'{self!r} has ended: objects cannot be attached to it (they were evicted)',
        )

    def add_proxy(self, *proxies: Proxy[Any]) -> None:
        """Attach the objects behind store proxies to this lifetime.

        Raises:
            NotAStoreProxyError: if a proxy was not made by a store (a ``StoreError``).
        """
        for proxy in proxies:
            factory = get_store_factory(proxy, 'add_proxy() to a lifetime')
            self.add_key(factory.key, store=factory.get_store())

    def done(self) -> bool:
        """Return whether the lifetime has ended: its objects have been evicted."""
        return self._ended.is_set()

    def remove_key(self, *keys: Any) -> None:
        """Stop tracking ``keys``: they are not evicted when the lifetime ends."""
        with self._lock:
            self._keys = [(s, k) for s, k in self._keys if k not in keys]

    def close(self, *, close_stores: bool = False) -> None:
        """End the lifetime now and evict its objects (a second call does nothing).

        Args:
            close_stores: Also close the stores of those objects (after evicting).
        """
        with self._lock:
            if self._done:
                return
            self._done = True
            keys, self._keys = self._keys, []
        try:
            _evict_all(keys, self)
        finally:
            self._ended.set()
        logger.debug('%r ended, evicted %d objects', self, len(keys))
        if close_stores:
            _close_stores(store for store, _ in keys)


def _evict_all(keys: list[tuple[Store[Any], Any]], lifetime: Any) -> None:
    """Evict every key; raise ``LifetimeError`` naming those of closed stores."""
    left: dict[str, int] = {}
    for store, key in keys:
        if store.closed:
            left[store.name] = left.get(store.name, 0) + 1
            continue
        try:
            store.evict(key)
        except Exception:  # pragma: no cover - depends on the backend's state
            logger.exception('could not evict %r from store %r', key, store.name)
    if left:
        where = ', '.join(f'{n} in store {s!r}' for s, n in left.items())
        message = (
            f'{lifetime!r} ended after its store was closed: {where} could not be evicted '
            'and stay in the channel; end lifetimes before closing their stores'
        )
        logger.warning(message)
        raise LifetimeError(message)


def _close_at_exit(lifetime: ContextLifetime) -> None:
    try:
        lifetime.close()
    except LifetimeError:
        return  # logged as a warning: the program is exiting


class LeaseLifetime(ContextLifetime):
    """A lifetime that ends ``expiry`` from now unless extended.

    Args:
        store: The store whose objects this lifetime evicts.
        expiry: When the lease ends: seconds from now, a :class:`~datetime.timedelta`
            from now, or a :class:`~datetime.datetime` (naive means local time). A lease
            whose end is not in the future ends at once (it does not raise).
        name: A name for logs.
        clock: The clock the lease is measured on (a :class:`tether.testing.FakeClock`
            in tests).
    """

    def __init__(
        self,
        store: Store[Any],
        expiry: float | datetime.timedelta | datetime.datetime,
        *,
        name: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._clock = clock
        seconds = _seconds_from_now(expiry, clock)
        super().__init__(store, name=name)
        self._expires = clock.monotonic() + seconds
        self._wake = threading.Condition(self._lock)
        self._thread = threading.Thread(
            target=self._run,
            name=f'tether-{self.name}',
            daemon=True,
        )
        if seconds <= 0:
            self.close()
        else:
            self._thread.start()

    def _run(self) -> None:
        with self._wake:
            while not self._done:
                remaining = self._expires - self._clock.monotonic()
                if remaining <= 0:
                    break
                self._clock.wait(self._wake, remaining)
        try:
            self.close()
        except LifetimeError:
            # Already logged as a warning; nobody is there to catch it in this thread.
            return

    def extend(self, expiry: float | datetime.timedelta | datetime.datetime) -> None:
        """Push the end of the lease further.

        Args:
            expiry: Seconds or a :class:`~datetime.timedelta` to add to the current end,
                or a :class:`~datetime.datetime` that becomes the new end (even if it is
                earlier than the current one).

        Raises:
            LifetimeError: if the lease has already ended.
        """
        with self._wake:
            if self._done:
                raise LifetimeError(f'{self!r} has ended and cannot be extended')
            if isinstance(expiry, datetime.datetime):
                self._expires = self._clock.monotonic() + _seconds_from_now(expiry, self._clock)
            elif isinstance(expiry, datetime.timedelta):
                self._expires += expiry.total_seconds()
            else:
                self._expires += expiry
            self._wake.notify_all()

    def close(self, *, close_stores: bool = False) -> None:
        """End the lease now, evicting its objects (and closing their stores if asked)."""
        super().close(close_stores=close_stores)
        with self._wake:
            self._wake.notify_all()


class StaticLifetime(ContextLifetime):
    """The lifetime of the rest of the program: its objects are evicted at exit.

    A singleton: ``StaticLifetime()`` always returns the same instance. Objects of any
    store can be attached (``add_key(..., store=s)``); the store argument of the
    constructor is optional.
    """

    _instance: StaticLifetime | None = None
    _instance_lock = threading.Lock()

    def __new__(cls, store: Store[Any] | None = None) -> StaticLifetime:
        with cls._instance_lock:
            if cls._instance is None:
                instance = object.__new__(cls)
                ContextLifetime.__init__(instance, None, name='static')
                atexit.register(_close_at_exit, instance)
                cls._instance = instance
            return cls._instance

    def __init__(self, store: Store[Any] | None = None) -> None:
        """Nothing to do: the singleton is set up in ``__new__``."""

    def add_key(self, *keys: Any, store: Store[Any] | None = None) -> None:
        """Attach objects of ``store`` until the program exits.

        Raises:
            LifetimeArgumentError: without ``store`` (a :class:`LifetimeError` and a
                :class:`ValueError`).
        """
        if store is None:
            raise LifetimeArgumentError(
                'the static lifetime needs the store of the keys: store=...',
            )
        super().add_key(*keys, store=store)

    def __exit__(self, *exc_info: object) -> None:
        """Leaving a ``with`` block does not end the static lifetime."""


def _seconds_from_now(
    expiry: float | datetime.timedelta | datetime.datetime,
    clock: Clock,
) -> float:
    if isinstance(expiry, datetime.datetime):
        # timestamp() reads a naive datetime as local time.
        return expiry.timestamp() - clock.time()
    if isinstance(expiry, datetime.timedelta):
        return expiry.total_seconds()
    if isinstance(expiry, bool) or not isinstance(expiry, int | float):
        raise LifetimeArgumentError(
            f'a lease expiry is seconds, a timedelta or a datetime, not {type(expiry).__name__}',
        )
    return float(expiry)


def _close_stores(stores: Iterable[Store[Any]]) -> None:
    unique = {id(s): s for s in stores}
    for store in unique.values():
        if not store.closed:
            store.close()


def register_lifetime_atexit(
    lifetime: Lifetime,
    close_stores: bool = True,
) -> Callable[[], None]:
    """End ``lifetime`` when the program exits (and close its stores, by default).

    Returns:
        The function registered with :mod:`atexit` (pass it to ``atexit.unregister`` to
        cancel).
    """

    close: Any = lifetime.close
    takes_flag = 'close_stores' in inspect.signature(close).parameters

    def _end() -> None:
        if close_stores and takes_flag:
            close(close_stores=True)
        else:
            close()

    atexit.register(_end)
    return _end
