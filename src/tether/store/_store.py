"""The Store: the object-level API over one connector."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Generic, TypeVar, cast, overload

from tether import _tracing
from tether._closing import ClosingContext
from tether._missing import MISSING as _MISSING
from tether.connectors.base import Decode, adapt
from tether.connectors.local import LocalConnector
from tether.connectors.protocols import Capabilities, Connector
from tether.exceptions import (
    InvalidArgumentError,
    NonProxiableTypeError,
    SerializationError,
    SerializerOutputError,
    StoreError,
)
from tether.proxy import Proxy, get_factory
from tether.serialize import BytesLike, Deserializer, Serializer, serialize_parts
from tether.serialize import deserialize as default_deserialize
from tether.store._cache import LRUCache
from tether.store._patterns import NONPROXIABLE, StorePatterns
from tether.store._registry import (
    register_store,
    registered_store,
    set_store_builder,
    unregister_store,
)
from tether.store.config import StoreConfig, import_from_path
from tether.store.factory import StoreFactory
from tether.store.lifetimes import Lifetime
from tether.store.metrics import StoreMetrics

__all__ = ['Store']

ConnectorT = TypeVar('ConnectorT', bound=Connector[Any])
T = TypeVar('T')

_NONPROXIABLE = NONPROXIABLE
_CORE_METHODS = ('put', 'get', 'exists', 'evict')


class Store(StorePatterns, ClosingContext, Generic[ConnectorT]):
    """Puts, gets and proxies Python objects through one connector.

    ``Store[C]`` is generic over its connector's type ``C`` (a
    :class:`~tether.connectors.protocols.Connector`); what the connector can do beyond
    that (:class:`~tether.connectors.protocols.Capabilities`: deferred keys, vectored
    writes, vectored batches, blocking waits) is checked once, here, and kept in
    :attr:`capabilities`.

    Args:
        name: Name of the store; proxies find the store by this name in every process.
        connector: The connector to the mediated channel (default: a new
            :class:`~tether.connectors.local.LocalConnector`).
        serializer: Function from object to bytes used instead of
            :func:`tether.serialize.serialize`.
        deserializer: Function from bytes to object used instead of
            :func:`tether.serialize.deserialize`.
        cache_size: How many deserialized objects this process keeps (LRU); 0 disables.
        metrics: Record timings and sizes (see :mod:`tether.store.metrics`).
        populate_target: Proxies returned by :meth:`proxy` start resolved in this process
            (the object is at hand, so using the proxy here costs nothing). With a custom
            ``deserializer`` too, as in ProxyStore: the proxy's target here is the object
            given, not what the deserializer would return (pass
            ``populate_target=False`` to have it resolve through the deserializer; such
            proxies start of unknown class).
        register: Register the store in this process's registry at once.

    Raises:
        StoreExistsError: if ``register`` and another store has the same name.
        InvalidArgumentError: if ``connector`` is not a connector (it lacks one of the
            methods of :class:`~tether.connectors.protocols.Connector`).
    """

    @overload
    def __init__(
        self: Store[LocalConnector],
        name: str = 'default',
        connector: None = None,
        *,
        serializer: Serializer | None = None,
        deserializer: Deserializer | None = None,
        cache_size: int = 16,
        metrics: bool = False,
        populate_target: bool = True,
        register: bool = False,
    ) -> None: ...

    @overload
    def __init__(
        self,
        name: str,
        connector: ConnectorT,
        *,
        serializer: Serializer | None = None,
        deserializer: Deserializer | None = None,
        cache_size: int = 16,
        metrics: bool = False,
        populate_target: bool = True,
        register: bool = False,
    ) -> None: ...

    def __init__(
        self,
        name: str = 'default',
        connector: ConnectorT | None = None,
        *,
        serializer: Serializer | None = None,
        deserializer: Deserializer | None = None,
        cache_size: int = 16,
        metrics: bool = False,
        populate_target: bool = True,
        register: bool = False,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError('a store needs a non-empty name')
        self.name = name
        if connector is None:
            connector = cast(ConnectorT, LocalConnector())
        else:
            # The bytes-level core every store call relies on; the rest of the Connector
            # protocol (batches, config, close) is used where needed.
            missing = [m for m in _CORE_METHODS if not callable(getattr(type(connector), m, None))]
            if missing:
                raise InvalidArgumentError(
                    f'store {name!r}: {connector!r} is not a connector (it lacks '
                    f'{", ".join(missing)}); see tether.connectors.protocols.Connector',
                )
        self.connector: ConnectorT = connector
        self.capabilities = Capabilities.of(connector)
        """What the connector can do beyond the :class:`Connector` protocol."""
        # The one write path and read path (tether.connectors.base): the connector itself
        # if it derives from ConnectorBase, else adapted once, here.
        self._io = adapt(connector)
        self.serializer = serializer
        self.deserializer = deserializer
        self.cache_size = cache_size
        self.populate_target = populate_target
        self.cache: LRUCache[Any, Any] = LRUCache(cache_size)
        self.metrics: StoreMetrics | None = StoreMetrics() if metrics else None
        self.closed = False
        self._config: StoreConfig | None = None
        if register:
            register_store(self)

    def __repr__(self) -> str:
        return f'Store({self.name!r}, {self.connector!r})'

    # Configuration ---------------------------------------------------------------------

    def config(self) -> StoreConfig:
        """Return the config that rebuilds this store (and its connector) elsewhere."""
        if self._config is None:
            self._config = StoreConfig.for_connector(
                self.name,
                self.connector,
                serializer=self.serializer,
                deserializer=self.deserializer,
                cache_size=self.cache_size,
                metrics=self.metrics is not None,
                populate_target=self.populate_target,
            )
        return self._config

    @classmethod
    def from_config(cls, config: StoreConfig) -> Store[Any]:
        """Build a store (and its connector) from a config."""
        return Store(
            config.name,
            config.make_connector(),
            serializer=None if config.serializer is None else import_from_path(config.serializer),
            deserializer=(
                None if config.deserializer is None else import_from_path(config.deserializer)
            ),
            cache_size=config.cache_size,
            metrics=config.metrics,
            populate_target=config.populate_target,
            register=config.auto_register,
        )

    def close(self, *args: Any, **kwargs: Any) -> None:
        """Close the connector (arguments go to its ``close``) and unregister the store."""
        if registered_store(self.name) is self:
            unregister_store(self.name)
        self.cache.clear()
        self.closed = True
        close: Callable[..., None] = self.connector.close
        close(*args, **kwargs)

    # Serialization ---------------------------------------------------------------------

    def _record(
        self,
        op: str,
        key: Any,
        start: int,
        nbytes: int = 0,
        size_attribute: str | None = None,
    ) -> Any:
        """Record operation ``op`` begun at ``start`` (``perf_counter_ns``) in the
        metrics and, with tracing on, as a span (returned; else ``None``)."""
        if self.metrics is not None:
            self.metrics.add_time(op, key, (time.perf_counter_ns() - start) / 1e6, nbytes)
            if size_attribute is not None:
                # ProxyStore's names: store.put.object_size, store.put_batch.object_sizes ...
                self.metrics.add_attribute(size_attribute, key, nbytes)
        if _tracing.on:
            return _tracing.record(op, start, {'tether.store': self.name, 'tether.bytes': nbytes})
        return None

    def serialize(self, obj: Any, serializer: Serializer | None = None) -> BytesLike:
        """Serialize ``obj`` with ``serializer``, the store's, or the default."""
        fn = serializer or self.serializer
        if fn is None:
            return b''.join(serialize_parts(obj))
        data = fn(obj)
        if not isinstance(data, bytes | bytearray | memoryview):
            raise SerializerOutputError(
                f'serializer {fn!r} of store {self.name!r} returned '
                f'{type(data).__name__}, expected bytes',
            )
        return data

    def deserialize(self, data: BytesLike, deserializer: Deserializer | None = None) -> Any:
        """Deserialize ``data`` with ``deserializer``, the store's, or the default."""
        fn = deserializer or self.deserializer or default_deserialize
        try:
            return fn(data)
        except SerializationError:
            raise
        except Exception as e:
            raise SerializationError(
                f'deserializer {fn!r} of store {self.name!r} failed: {e}',
            ) from e

    def _decoder(self, deserializer: Deserializer | None) -> tuple[Decode, bool]:
        """The reads' ``decode`` and ``own_format`` (the store deserializes with tether's
        own format: the connector may build the object as it reads)."""
        own = deserializer is None and self.deserializer is None
        if deserializer is None:
            return self.deserialize, own
        return partial(self.deserialize, deserializer=deserializer), own

    # Object operations -----------------------------------------------------------------

    def _put_one(self, obj: Any, serializer: Serializer | None, kwargs: dict[str, Any]) -> Any:
        start = time.perf_counter_ns()
        if serializer is None and self.serializer is None and not kwargs:
            parts = serialize_parts(obj)
            nbytes = sum(memoryview(p).nbytes for p in parts)
            key = self._io.put_parts_background(parts)[0]
        else:
            data = self.serialize(obj, serializer)
            nbytes = memoryview(data).nbytes
            put: Callable[..., Any] = self.connector.put
            key = put(data, **kwargs)
        self._record('store.put', key, start, nbytes, 'store.put.object_size')
        return key

    def put(
        self,
        obj: Any,
        *,
        serializer: Serializer | None = None,
        lifetime: Lifetime | None = None,
        **kwargs: Any,
    ) -> Any:
        """Serialize ``obj``, store it, and return its key.

        ``lifetime`` (see :mod:`tether.store.lifetimes`) evicts the object when it ends.
        Extra keyword arguments go to the connector's ``put`` (for example the
        constraints of a multi-connector).

        Over a :class:`~tether.connectors.protocols.BackgroundWriteConnector` (shared
        memory), a large object whose serialized memory cannot change (``bytes``, a
        string, a pickle of plain values) may still be being copied when this returns:
        the key is valid at once, and whoever reads it first waits for the copy.
        """
        self._check_open()
        key = self._put_one(obj, serializer, kwargs)
        if lifetime is not None:
            lifetime.add_key(key, store=self)
        return key

    def put_batch(
        self,
        objs: Sequence[Any],
        *,
        serializer: Serializer | None = None,
        lifetime: Lifetime | None = None,
        **kwargs: Any,
    ) -> list[Any]:
        """Serialize and store several objects in one connector call; return their keys.

        ``lifetime`` evicts them all when it ends. Over a
        :class:`~tether.connectors.protocols.VectoredBatchConnector` (without a custom
        serializer or connector keywords) each object's serialized parts go to the
        connector as they are, never joined: a batch copies no more than :meth:`put`.
        """
        self._check_open()
        if lifetime is not None:
            batch = self.put_batch(objs, serializer=serializer, **kwargs)
            lifetime.add_key(*batch, store=self)
            return batch
        start = time.perf_counter_ns()
        keys: list[Any]
        if serializer is None and self.serializer is None and not kwargs:
            batch = [serialize_parts(o) for o in objs]
            nbytes = sum(memoryview(p).nbytes for parts in batch for p in parts)
            keys = self._io.put_parts_batch(batch)
        else:
            datas = [self.serialize(o, serializer) for o in objs]
            nbytes = sum(memoryview(d).nbytes for d in datas)
            put_batch: Callable[..., list[Any]] = self.connector.put_batch
            keys = put_batch(datas, **kwargs)
        self._record('store.put_batch', tuple(keys), start, nbytes, 'store.put_batch.object_sizes')
        return keys

    def get(
        self,
        key: Any,
        *,
        deserializer: Deserializer | None = None,
        default: Any = None,
    ) -> Any:
        """Return the object under ``key`` (from the cache if there), or ``default``."""
        self._check_open()
        start = time.perf_counter_ns()
        obj = self.cache.get(key, _MISSING)
        if obj is not _MISSING:
            self._record('store.get.cache_hit', key, start)
            return obj
        generation = self.cache.generation
        # Tether's own format: the connector may build the object as it reads. (What
        # _decoder returns, written out: get is the hot path, a call less.)
        own = deserializer is None and self.deserializer is None
        decode = (
            self.deserialize
            if deserializer is None
            else partial(self.deserialize, deserializer=deserializer)
        )
        loaded = self._io.get_object(key, decode, own)
        if loaded is None:
            self._record('store.get.missing', key, start)
            return default
        obj, nbytes = loaded
        # Not cached if an evict ran meanwhile: it would serve an evicted object again.
        self.cache.set(key, obj, generation=generation)
        self._record('store.get', key, start, nbytes, 'store.get.object_size')
        return obj

    def get_batch(
        self,
        keys: Sequence[Any],
        *,
        deserializer: Deserializer | None = None,
        default: Any = None,
    ) -> list[Any]:
        """The objects under ``keys`` (``default`` for a missing one): those in this
        process's cache from it, the others with one ``get_batch`` of the connector (one
        round trip per Redis server)."""
        self._check_open()
        start = time.perf_counter_ns()
        out: list[Any] = [self.cache.get(key, _MISSING) for key in keys]
        todo = [i for i, obj in enumerate(out) if obj is _MISSING]
        if not todo:
            return out
        generation = self.cache.generation
        nbytes = 0
        loaded_all = self._io.get_objects([keys[i] for i in todo], *self._decoder(deserializer))
        for i, loaded in zip(todo, loaded_all, strict=True):
            if loaded is None:
                out[i] = default
                continue
            out[i], size = loaded
            nbytes += size
            # Not cached if an evict ran meanwhile: it would serve an evicted object again.
            self.cache.set(keys[i], out[i], generation=generation)
        self._record('store.get_batch', tuple(keys[i] for i in todo), start, nbytes)
        return out

    def exists(self, key: Any) -> bool:
        """Return whether an object is stored under ``key``."""
        self._check_open()
        return key in self.cache or bool(self.connector.exists(key))

    def is_cached(self, key: Any) -> bool:
        """Return whether this process's cache holds the object under ``key``."""
        return key in self.cache

    def evict(self, key: Any) -> None:
        """Remove the object under ``key`` from the channel and the cache."""
        self._check_open()
        start = time.perf_counter_ns()
        self.cache.evict(key)
        self.connector.evict(key)
        # Again after the connector: a get that read before the evict may have cached.
        self.cache.evict(key)
        self._record('store.evict', key, start)

    # Proxies ---------------------------------------------------------------------------

    def proxy(
        self,
        obj: T,
        *,
        evict: bool = False,
        lifetime: Lifetime | None = None,
        serializer: Serializer | None = None,
        deserializer: Deserializer | None = None,
        skip_nonproxiable: bool = False,
        populate_target: bool | None = None,
        **kwargs: Any,
    ) -> Proxy[T]:
        """Store ``obj`` and return a proxy of it.

        Args:
            obj: The object.
            evict: Evict the object from the store when the proxy first resolves.
            lifetime: A lifetime (see :mod:`tether.store.lifetimes`) that evicts the
                object when it ends.
            serializer: Serializer for this object only.
            deserializer: Deserializer the proxy uses.
            skip_nonproxiable: Return ``None``, ``True``/``False`` ... as they are
                instead of raising.
            populate_target: Override the store's ``populate_target``.
            kwargs: Passed to the connector's ``put``.

        Raises:
            NonProxiableTypeError: for ``None``, bools, ``NotImplemented`` and ``...``
                (a proxy of them cannot behave like them: ``p is None`` is false).
            InvalidArgumentError: for ``evict=True`` together with a ``lifetime``.
        """
        _check_evict_lifetime(evict, lifetime)
        if isinstance(obj, _NONPROXIABLE):
            if skip_nonproxiable:
                return cast(Proxy[T], obj)
            raise NonProxiableTypeError(
                f'{obj!r} cannot be proxied (identity checks like "is None" would '
                'break); pass skip_nonproxiable=True to get it back as it is',
            )
        self._check_open()
        start = time.perf_counter_ns()
        key = self._put_one(obj, serializer, kwargs)
        proxy = self._make_proxy(obj, key, evict, deserializer, populate_target)
        if lifetime is not None:
            lifetime.add_key(key, store=self)
        span = self._record('store.proxy', key, start)
        if span is not None:
            _join_trace(span, [proxy])
        return proxy

    def proxy_batch(
        self,
        objs: Sequence[T],
        *,
        evict: bool = False,
        lifetime: Lifetime | None = None,
        serializer: Serializer | None = None,
        deserializer: Deserializer | None = None,
        populate_target: bool | None = None,
        skip_nonproxiable: bool = False,
        **kwargs: Any,
    ) -> list[Proxy[T]]:
        """Store several objects in one connector call and return their proxies.

        With ``skip_nonproxiable``, ``None``, bools ... come back as they are, in place.

        Raises:
            NonProxiableTypeError: for ``None``, bools ... without ``skip_nonproxiable``.
            InvalidArgumentError: for ``evict=True`` together with a ``lifetime``.
        """
        _check_evict_lifetime(evict, lifetime)
        todo = objs
        if any(isinstance(o, _NONPROXIABLE) for o in objs):
            if not skip_nonproxiable:
                bad = next(o for o in objs if isinstance(o, _NONPROXIABLE))
                raise NonProxiableTypeError(f'{bad!r} cannot be proxied')
            todo = [o for o in objs if not isinstance(o, _NONPROXIABLE)]
            if not todo:
                return cast(list[Proxy[T]], list(objs))
        start = time.perf_counter_ns()
        keys = self.put_batch(todo, serializer=serializer, **kwargs)
        proxies = [
            self._make_proxy(o, k, evict, deserializer, populate_target)
            for o, k in zip(todo, keys, strict=True)
        ]
        if lifetime is not None:
            lifetime.add_key(*keys, store=self)
        span = self._record('store.proxy_batch', tuple(keys), start)
        if span is not None:
            _join_trace(span, proxies)
        if todo is not objs:  # the others (skip_nonproxiable) come back as they are, in place
            made = iter(proxies)
            mixed: list[Any] = [o if isinstance(o, _NONPROXIABLE) else next(made) for o in objs]
            return mixed
        return proxies

    def proxy_from_key(
        self,
        key: Any,
        *,
        evict: bool = False,
        deserializer: Deserializer | None = None,
        target_class: type | None = None,
        lifetime: Lifetime | None = None,
    ) -> Proxy[Any]:
        """Return a proxy of the object already stored under ``key`` (unresolved).

        ``lifetime`` evicts the object when it ends.

        Raises:
            InvalidArgumentError: for ``evict=True`` together with a ``lifetime``.
        """
        _check_evict_lifetime(evict, lifetime)
        if lifetime is not None:
            lifetime.add_key(key, store=self)
        return Proxy(self._factory(key, evict, deserializer), target_class=target_class)

    def _check_open(self) -> None:
        if self.closed:
            raise StoreError(f'store {self.name!r} is closed')


def _check_evict_lifetime(evict: bool, lifetime: Lifetime | None) -> None:
    if evict and lifetime is not None:
        raise InvalidArgumentError(
            'evict=True and a lifetime cannot go together: the object would be evicted '
            'twice (on first resolve and when the lifetime ends); pick one',
        )


def _join_trace(span: Any, proxies: Sequence[Proxy[Any]]) -> None:
    """Make each proxy's resolution, wherever it happens, join the trace of ``span``."""
    carrier = _tracing.carrier_of(span)
    for proxy in proxies:
        factory = get_factory(proxy)
        if isinstance(factory, StoreFactory):
            factory.trace = carrier


set_store_builder(Store.from_config)
