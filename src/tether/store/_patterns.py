"""The proxy patterns of a Store (issue 4): futures, owned and locked proxies, and
proxies of objects serialized already. Mixed into :class:`tether.store.Store`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from tether._clock import SYSTEM_CLOCK, Clock
from tether.exceptions import NonProxiableTypeError
from tether.proxy import (
    Proxy,
    ProxyLocker,
    ProxyMetadata,
    metadata_of,
    set_metadata,
    set_target,
)
from tether.serialize import BytesLike, Deserializer, Serializer
from tether.store.factory import StoreFactory
from tether.store.future import Future, FutureFactory
from tether.store.lifetimes import Lifetime
from tether.store.ref import OwnedProxy

if TYPE_CHECKING:
    from tether.connectors.base import ConnectorBase
    from tether.connectors.protocols import Capabilities
    from tether.store._store import Store
    from tether.store.config import StoreConfig

__all__ = ['NONPROXIABLE', 'StorePatterns']

T = TypeVar('T')

NONPROXIABLE = (type(None), bool, type(NotImplemented), type(Ellipsis))
"""Types a store never proxies: a proxy of them cannot behave like them (``is None``)."""


class StorePatterns:
    """The proxy-pattern methods of :class:`~tether.store.Store` (see there)."""

    # What the methods below use of the store (defined by Store).
    name: str
    deserializer: Deserializer | None
    populate_target: bool
    capabilities: Capabilities
    _io: ConnectorBase[Any]

    if TYPE_CHECKING:

        def _check_open(self) -> None: ...

        def config(self) -> StoreConfig: ...

        def put(self, obj: Any, *, serializer: Serializer | None = None, **kwargs: Any) -> Any: ...

        def proxy(self, obj: T, **kwargs: Any) -> Proxy[T]: ...

        def _record(self, op: str, key: Any, start: int, nbytes: int = 0) -> None: ...

    def _factory(
        self, key: Any, evict: bool, deserializer: Deserializer | None
    ) -> StoreFactory[Any]:
        """The factory of a proxy of ``key`` in this store."""
        return StoreFactory(
            key,
            self.config(),
            evict=evict,
            deserializer=deserializer,
            store=cast('Store[Any]', self),
        )

    def _make_proxy(
        self,
        obj: Any,
        key: Any,
        evict: bool,
        deserializer: Deserializer | None,
        populate_target: bool | None,
        *,
        proxy_type: type[Proxy[Any]] = Proxy,
        hash_target: bool = True,
    ) -> Proxy[Any]:
        factory = self._factory(key, evict, deserializer)
        proxy = proxy_type(factory)
        populate = self.populate_target if populate_target is None else populate_target
        if deserializer is not None or self.deserializer is not None:
            # A custom deserializer may return anything: the target's class, hash and
            # value are not known until it runs, so the proxy takes none from ``obj``.
            # Populated, as in ProxyStore, the proxy's target here is ``obj`` itself, but
            # a pickled copy claims nothing from it (it resolves through the deserializer).
            if populate:
                factory.target_differs = True
                set_target(proxy, obj)
            return proxy
        set_metadata(proxy, metadata_of(obj) if hash_target else ProxyMetadata(type(obj)))
        if populate:
            set_target(proxy, obj)
        return proxy

    def future(
        self,
        *,
        evict: bool = False,
        timeout: float | None = None,
        serializer: Serializer | None = None,
        deserializer: Deserializer | None = None,
        poll_interval: float = 0.001,
        poll_max: float = 0.5,
        clock: Clock = SYSTEM_CLOCK,
    ) -> Future[T]:
        """Return a :class:`~tether.store.future.Future` backed by this store.

        Args:
            evict: Evict the result when a proxy of the future first resolves.
            timeout: Seconds ``result()`` and the future's proxies wait by default
                (``None``: no limit).
            serializer: Serializer ``set_result`` uses.
            deserializer: Deserializer ``result`` and the proxies use.
            poll_interval: First polling interval, for connectors that cannot block.
            poll_max: Largest polling interval.
            clock: The clock waits are measured on in this process (a copy of the
                future sent elsewhere uses the system clock there).

        Raises:
            MissingCapabilityError: if the connector cannot hand out keys in advance
                (``new_key``); a :class:`~tether.exceptions.StoreError` and a
                :class:`NotImplementedError`.
        """
        self._check_open()
        deferrable = self.capabilities.require_deferrable('back futures', f'store {self.name!r}')
        factory: FutureFactory[T] = FutureFactory(
            deferrable.new_key(),
            self.config(),
            evict=evict,
            deserializer=deserializer,
            timeout=timeout,
            poll_interval=poll_interval,
            poll_max=poll_max,
            store=cast('Store[Any]', self),
            clock=clock,
        )
        return Future(factory, serializer=serializer)

    def owned_proxy(
        self,
        obj: T,
        *,
        serializer: Serializer | None = None,
        deserializer: Deserializer | None = None,
        populate_target: bool | None = None,
        skip_nonproxiable: bool = True,
        **kwargs: Any,
    ) -> OwnedProxy[T]:
        """Store ``obj`` and return its :class:`~tether.store.ref.OwnedProxy`.

        The object is evicted when the owned proxy goes out of scope (see
        :mod:`tether.store.ref`). ``None``, bools, ``NotImplemented`` and ``...`` come
        back as they are (``skip_nonproxiable=False`` raises instead), as ProxyStore's
        ``owned_proxy`` does.

        Raises:
            NonProxiableTypeError: for ``None``, bools ... with ``skip_nonproxiable=False``.
        """
        if isinstance(obj, NONPROXIABLE):
            if skip_nonproxiable:
                return cast(OwnedProxy[T], obj)
            raise NonProxiableTypeError(
                f'{obj!r} cannot be proxied (identity checks like "is None" would break)',
            )
        self._check_open()
        key = self.put(obj, serializer=serializer, **kwargs)
        proxy = self._make_proxy(
            obj, key, False, deserializer, populate_target, proxy_type=OwnedProxy
        )
        return cast(OwnedProxy[T], proxy)

    def proxy_serialized(
        self,
        obj: T,
        parts: Sequence[BytesLike],
        *,
        evict: bool = False,
        lifetime: Lifetime | None = None,
        populate_target: bool | None = None,
        hash_target: bool = True,
    ) -> Proxy[T]:
        """Store ``obj``, already serialized by :func:`~tether.serialize.serialize_parts`.

        For policies that serialize once to measure an object's size and then keep those
        bytes instead of serializing again. Returns the proxy, as
        :meth:`~tether.store.Store.proxy` does.
        ``hash_target=False`` skips hashing ``obj`` for the proxy's cached hash (hashing
        10 MB of ``bytes`` costs milliseconds; ``hash()`` of such a proxy then resolves it).
        """
        self._check_open()
        start = time.perf_counter_ns()
        nbytes = sum(memoryview(p).nbytes for p in parts)
        key = self._io.put_parts_background(parts)[0]
        self._record('store.put', key, start, nbytes)
        proxy = self._make_proxy(
            obj,
            key,
            evict,
            None,
            populate_target,
            hash_target=hash_target,
        )
        if lifetime is not None:
            lifetime.add_key(key, store=cast('Store[Any]', self))
        return proxy

    def locked_proxy(
        self,
        obj: T,
        *,
        evict: bool = False,
        lifetime: Lifetime | None = None,
        serializer: Serializer | None = None,
        deserializer: Deserializer | None = None,
        populate_target: bool | None = None,
        skip_nonproxiable: bool = True,
        **kwargs: Any,
    ) -> ProxyLocker[T]:
        """Store ``obj`` and return its proxy inside a :class:`~tether.proxy.ProxyLocker`.

        Arguments as for :meth:`~tether.store.Store.proxy`; ``None``, bools ... come back as
        they are unless ``skip_nonproxiable=False``.
        """
        if skip_nonproxiable and isinstance(obj, NONPROXIABLE):
            return cast(ProxyLocker[T], obj)
        return ProxyLocker(
            self.proxy(
                obj,
                evict=evict,
                lifetime=lifetime,
                serializer=serializer,
                deserializer=deserializer,
                populate_target=populate_target,
                **kwargs,
            ),
        )
