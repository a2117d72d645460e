"""The factory inside every store proxy."""

from __future__ import annotations

import dataclasses
import time
import weakref
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from tether import _tracing
from tether._missing import MISSING as _MISSING
from tether.exceptions import InvalidArgumentError, ProxyResolveMissingKeyError
from tether.store._pickling import config_from_state, config_state
from tether.store._registry import get_or_create_store, lookup_store
from tether.store.config import StoreConfig

if TYPE_CHECKING:
    from tether.serialize import Deserializer
    from tether.store._store import Store

__all__ = ['PollingStoreFactory', 'StoreFactory']

T = TypeVar('T')


@dataclasses.dataclass(eq=False, repr=False, slots=True)
class StoreFactory(Generic[T]):
    """Fetches one object from a store; carries what any process needs to do so.

    Pickles as its key, the store's config, the evict flag and the deserializer, in a few
    hundred bytes. In the process that made it, it uses the store that made it; elsewhere
    it rebuilds that store from the config (once per process, via the registry).

    Unpickling is the trusted path: the config's types are imported without the
    allowlist of :mod:`tether.store.allowlist`, since unpickling already runs whatever
    the pickle names. Load proxies only from producers you trust (``docs/security.md``).

    Args:
        key: Connector key of the object.
        store_config: Config of the store that holds it.
        evict: Evict the object from the store after the first resolve.
        deserializer: Deserializer to use instead of the store's.
    """

    key: Any
    store_config: StoreConfig
    _: dataclasses.KW_ONLY
    evict: bool = False
    deserializer: Deserializer | None = None
    store: dataclasses.InitVar[Store[Any] | None] = None
    target_differs: bool = dataclasses.field(default=False, init=False)
    """True when a proxy's local target is the object given, not what this factory
    resolves to (a custom deserializer): its class must not travel as the target's."""
    trace: dict[str, str] | None = dataclasses.field(default=None, init=False)
    """With tracing on: the W3C traceparent of the span that made the proxy (an id), so
    that its resolution, wherever it happens, joins that trace."""
    _store: weakref.ref[Store[Any]] | None = dataclasses.field(default=None, init=False)

    def __class_getitem__(cls, params: Any) -> Any:
        # ProxyStore's factories take two type parameters, StoreFactory[ConnectorT, T]:
        # at run time the connector's type is accepted and dropped (type checkers see one).
        if isinstance(params, tuple) and len(params) == 2:
            params = params[1]
        # super() with arguments: the dataclass (slots) is a new class, not this body's.
        parent: Any = super(StoreFactory, cls)
        return parent.__class_getitem__(params)

    def __post_init__(self, store: Store[Any] | None) -> None:
        if store is not None:
            self._store = weakref.ref(store)

    def __repr__(self) -> str:
        return f'{type(self).__name__}(store={self.store_config.name!r}, key={self.key!r})'

    def __reduce__(self) -> tuple[Any, ...]:
        base = (self.key, config_state(self.store_config), self.evict, self.deserializer)
        return (_rebuild, base if self.trace is None else (*base, self.trace))

    def _reduce_with(self, settings: dict[str, Any]) -> tuple[Any, ...]:
        """A subclass's ``__reduce__``: rebuilt as ``type(self)(..., **settings)``."""
        base = (self.key, config_state(self.store_config), self.evict, self.deserializer)
        if self.trace is None:
            return _rebuild_with, (type(self), base, settings)
        return _rebuild_with, (type(self), base, settings, self.trace)

    def _origin(self) -> Store[Any] | None:
        """The store that made this factory, in this process, if it is alive and open."""
        if self._store is not None:
            store = self._store()
            if store is not None and not store.closed:
                return store
        return None

    def get_store(self) -> Store[Any]:
        """Return the store this factory reads from (building it if needed)."""
        store = self._origin()
        return get_or_create_store(self.store_config) if store is None else store

    def origin_closed(self) -> bool:
        """Whether the store that made this factory, in this process, has been closed."""
        if self._store is None:
            return False
        store = self._store()
        return store is not None and store.closed

    def current_store(self) -> Store[Any] | None:
        """Return the store of this process this factory reads from, if there is one.

        Unlike :meth:`get_store` it never builds a store: ``None`` when there is none yet.
        """
        store = self._origin()
        return lookup_store(self.store_config) if store is None else store

    def __call__(self) -> T:
        if _tracing.on:
            attributes = {'tether.store': self.store_config.name, 'tether.key': str(self.key)}
            with _tracing.resolving('tether.proxy.resolve', self.trace, attributes):
                return self._resolve()
        return self._resolve()

    def _resolve(self) -> T:
        start = time.perf_counter_ns()
        store = self.get_store()
        obj = store.get(self.key, deserializer=self.deserializer, default=_MISSING)
        if obj is _MISSING:
            raise ProxyResolveMissingKeyError(self.key, store.name, repr(store.connector))
        if self.evict:
            store.evict(self.key)
        if store.metrics is not None:  # the whole resolve, as ProxyStore's metrics name it
            ms = (time.perf_counter_ns() - start) / 1e6
            store.metrics.add_time('factory.resolve', self.key, ms)
        return cast(T, obj)

    def resolve(self) -> T:
        """Fetch the object now (what calling the factory does; ProxyStore's name)."""
        return self()

    def resolve_async(self) -> None:
        """Kept for compatibility: use :func:`tether.proxy.resolve_async` on the proxy."""


def _rebuild(
    key: Any,
    state: tuple[Any, ...],
    evict: bool,
    deserializer: Deserializer | None,
    trace: dict[str, str] | None = None,
) -> StoreFactory[Any]:
    factory: StoreFactory[Any] = StoreFactory(
        key, config_from_state(state), evict=evict, deserializer=deserializer
    )
    factory.trace = trace
    return factory


def _rebuild_with(
    cls: type[StoreFactory[Any]],
    base: tuple[Any, tuple[Any, ...], bool, Deserializer | None],
    settings: dict[str, Any],
    trace: dict[str, str] | None = None,
) -> StoreFactory[Any]:
    key, state, evict, deserializer = base
    factory = cls(
        key, config_from_state(state), evict=evict, deserializer=deserializer, **settings
    )
    factory.trace = trace
    return factory


@dataclasses.dataclass(eq=False, repr=False, slots=True, kw_only=True)
class PollingStoreFactory(StoreFactory[T]):
    """A store factory that waits for its key to appear, polling the store.

    For objects a producer will put later under a key known in advance (see
    :meth:`Store.future <tether.store.Store.future>` for the usual way to do that).

    Args:
        key: Connector key of the object.
        store_config: Config of the store that holds it.
        deserializer: Deserializer to use instead of the store's.
        evict: Evict the object from the store after the first resolve.
        polling_interval: Seconds between the first two polls.
        polling_backoff_factor: Each interval is the previous one times this.
        polling_interval_limit: Largest interval (``None``: no limit).
        polling_timeout: Give up after polling this many seconds (``None``: never).

    Raises:
        InvalidArgumentError: for a non-positive interval or a backoff factor below 1.
        ProxyResolveMissingKeyError: (on resolve) when the timeout passes first.
    """

    polling_interval: float = 1
    polling_backoff_factor: float = 1
    polling_interval_limit: float | None = None
    polling_timeout: float | None = None

    def __post_init__(self, store: Store[Any] | None) -> None:
        if self.polling_interval <= 0 or self.polling_backoff_factor < 1:
            raise InvalidArgumentError(
                'polling_interval must be > 0 and polling_backoff_factor >= 1, got '
                f'{self.polling_interval} and {self.polling_backoff_factor}',
            )
        StoreFactory.__post_init__(self, store)

    def __reduce__(self) -> tuple[Any, ...]:
        return self._reduce_with(
            {
                'polling_interval': self.polling_interval,
                'polling_backoff_factor': self.polling_backoff_factor,
                'polling_interval_limit': self.polling_interval_limit,
                'polling_timeout': self.polling_timeout,
            }
        )

    def _resolve(self) -> T:
        start = time.perf_counter_ns()
        store = self.get_store()
        interval = self.polling_interval
        waited = 0.0
        while True:
            obj = store.get(self.key, deserializer=self.deserializer, default=_MISSING)
            if obj is not _MISSING:
                break
            if self.polling_timeout is not None and waited >= self.polling_timeout:
                raise ProxyResolveMissingKeyError(self.key, store.name, repr(store.connector))
            step = interval
            if self.polling_timeout is not None:
                step = min(step, self.polling_timeout - waited)
            time.sleep(max(step, 0.0))
            waited += step
            interval *= self.polling_backoff_factor
            if self.polling_interval_limit is not None:
                interval = min(interval, self.polling_interval_limit)
        if self.evict:
            store.evict(self.key)
        if store.metrics is not None:  # ProxyStore's name for a polling factory's resolve
            ms = (time.perf_counter_ns() - start) / 1e6
            store.metrics.add_time('factory.polling_resolve', self.key, ms)
        return cast(T, obj)
