"""The connector base class: one write path and one read path for every connector.

A :class:`~tether.store.Store` talks to its connector through the methods of
:class:`ConnectorBase`, and only those: it writes an object's serialized parts with
:meth:`~ConnectorBase.put_parts_background` (one object) or
:meth:`~ConnectorBase.put_parts_batch` (several), and reads one with
:meth:`~ConnectorBase.get_object` (several: :meth:`~ConnectorBase.get_objects`). A
connector implements the core of the :class:`~tether.connectors.protocols.Connector`
contract (``put``, ``get``, ``exists``, ``evict``, ``config``/``from_config``,
``close``); the base class supplies the rest from it, and a connector overrides what it
does faster:

* ``put_batch``/``get_batch``: one ``put``/``get`` per item (Redis: one round trip);
* ``put_parts``: join the parts, ``put`` (every built-in connector writes them as they are);
* ``put_parts_batch``: ``put_parts`` per item (Redis, node, endpoint: one round trip);
* ``put_parts_background``: ``put_parts``, the returned future done (shared memory copies
  in the background);
* ``get_object``: ``get``, then deserialize (shared memory builds from lent bytes, Redis
  decodes as it reads);
* ``get_objects``: ``get_batch``, then deserialize each (Redis decodes as it reads, still
  one round trip).

A connector written against the protocols alone (not a subclass) keeps working: a Store
adapts it once, when it is made (:func:`adapt`), using the optional capability
protocols it implements (:class:`~tether.connectors.protocols.VectoredConnector` ...).
The conformance suite :class:`tether.testing.connectors.ConnectorConformance` runs
against a connector's own methods and those of its base class.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Generic, Self, TypeVar

from tether.serialize import BytesLike, copies_out

__all__ = ['ConnectorBase', 'Decode', 'adapt', 'lent_object']

KeyT = TypeVar('KeyT')

Decode = Callable[[BytesLike], Any]
"""A deserializer, as :meth:`ConnectorBase.get_object` is given it."""


def _done() -> Future[None]:
    future: Future[None] = Future()
    future.set_result(None)
    return future


_DONE = _done()  # shared: a completed future never changes


class ConnectorBase(Generic[KeyT]):
    """Base class of connectors: the core they implement, the defaults it supplies.

    Subclasses implement ``put``, ``get``, ``exists``, ``evict``, ``config``,
    ``from_config`` and ``close``. Deferrable connectors add ``new_key`` and ``set``
    (:class:`~tether.connectors.protocols.DeferrableConnector`); those that can block until
    a key is set add ``wait``.
    """

    __slots__ = ()

    # The core (each connector implements it) ----------------------------------------

    def put(self, data: BytesLike) -> KeyT:
        """Store ``data`` and return its new key."""
        raise NotImplementedError

    def get(self, key: KeyT) -> BytesLike | None:
        """Return the bytes under ``key``, or ``None`` if there are none."""
        raise NotImplementedError

    def exists(self, key: KeyT) -> bool:
        """Return whether an object is stored under ``key``."""
        raise NotImplementedError

    def evict(self, key: KeyT) -> None:
        """Remove the object under ``key`` (no error if it is missing)."""
        raise NotImplementedError

    def config(self) -> dict[str, Any]:
        """Return the keyword arguments that rebuild this connector elsewhere."""
        raise NotImplementedError

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Self:
        """Build a connector from :meth:`config`'s output."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the connector's resources (connections, file handles)."""

    # The defaults (overridden where a connector does better) --------------------------

    def put_batch(self, datas: Sequence[BytesLike]) -> list[KeyT]:
        """Store each item and return their keys, in order."""
        return [self.put(d) for d in datas]

    def get_batch(self, keys: Sequence[KeyT]) -> list[BytesLike | None]:
        """Return the bytes under each key, in order (``None`` where missing)."""
        return [self.get(k) for k in keys]

    def put_parts(self, parts: Sequence[BytesLike]) -> KeyT:
        """Store the concatenation of ``parts`` and return its key (default: joined)."""
        return self.put(parts[0] if len(parts) == 1 else b''.join(parts))

    def put_parts_batch(self, batch: Sequence[Sequence[BytesLike]]) -> list[KeyT]:
        """Store the concatenation of each item's parts; return their keys, in order."""
        return [self.put_parts(parts) for parts in batch]

    def put_parts_background(self, parts: Sequence[BytesLike]) -> tuple[KeyT, Future[None]]:
        """Store the concatenation of ``parts``; return its key and a future that
        completes when it is written (default: written at once, the future done).

        A connector that copies in the background (its key usable at once, readers
        waiting for the copy) copies only memory that cannot change (``bytes``).
        """
        return self.put_parts(parts), _DONE

    def get_object(self, key: KeyT, decode: Decode, own_format: bool) -> tuple[Any, int] | None:
        """Return the object under ``key``, built by ``decode``, and its size in bytes;
        ``None`` if there is none.

        ``own_format`` says ``decode`` reads tether's own serialization
        (:func:`tether.serialize.deserialize`): a connector may then build the object
        while it reads (from bytes it lends, or into the object's final memory).
        """
        data = self.get(key)
        if data is None:
            return None
        return decode(data), memoryview(data).nbytes

    def get_objects(
        self, keys: Sequence[KeyT], decode: Decode, own_format: bool
    ) -> list[tuple[Any, int] | None]:
        """:meth:`get_object` of each key, in order, read with one :meth:`get_batch`."""
        return [
            None if data is None else (decode(data), memoryview(data).nbytes)
            for data in self.get_batch(keys)
        ]


def _capability(connector: Any, protocol: type, method: str) -> Callable[..., Any] | None:
    """``connector``'s ``method`` if it implements ``protocol``, else ``None``."""
    return getattr(connector, method) if isinstance(connector, protocol) else None


class _Adapted(ConnectorBase[Any]):
    """A protocol-only connector seen through :class:`ConnectorBase` (see :func:`adapt`)."""

    __slots__ = (
        '_background',
        '_c',
        '_decoded',
        '_decoded_batch',
        '_lent',
        '_parts',
        '_parts_batch',
    )

    def __init__(self, connector: Any) -> None:
        from tether.connectors import protocols as p

        self._c = connector
        # Resolved once: the capability each store-facing method uses, or None.
        self._parts = _capability(connector, p.VectoredConnector, 'put_parts')
        self._parts_batch = _capability(connector, p.VectoredBatchConnector, 'put_parts_batch')
        self._background = _capability(
            connector, p.BackgroundWriteConnector, 'put_parts_background'
        )
        self._lent = isinstance(connector, p.LendingConnector)
        self._decoded = _capability(connector, p.DecodingConnector, 'get_decoded')
        self._decoded_batch = _capability(connector, p.DecodingBatchConnector, 'get_decoded_batch')

    def __repr__(self) -> str:
        return f'adapt({self._c!r})'

    def put(self, data: BytesLike) -> Any:
        return self._c.put(data)

    def get(self, key: Any) -> BytesLike | None:
        data: BytesLike | None = self._c.get(key)
        return data

    def exists(self, key: Any) -> bool:
        return bool(self._c.exists(key))

    def evict(self, key: Any) -> None:
        self._c.evict(key)

    def config(self) -> dict[str, Any]:
        config: dict[str, Any] = self._c.config()
        return config

    def close(self) -> None:
        self._c.close()

    def put_batch(self, datas: Sequence[BytesLike]) -> list[Any]:
        return list(self._c.put_batch(datas))

    def get_batch(self, keys: Sequence[Any]) -> list[BytesLike | None]:
        return list(self._c.get_batch(keys))

    def put_parts(self, parts: Sequence[BytesLike]) -> Any:
        if self._parts is not None:
            return self._parts(parts)
        return super().put_parts(parts)

    def put_parts_batch(self, batch: Sequence[Sequence[BytesLike]]) -> list[Any]:
        if self._parts_batch is not None:
            return list(self._parts_batch(batch))
        return super().put_parts_batch(batch)

    def put_parts_background(self, parts: Sequence[BytesLike]) -> tuple[Any, Future[None]]:
        if self._background is not None:
            key, future = self._background(parts)
            return key, future
        return super().put_parts_background(parts)

    def get_object(self, key: Any, decode: Decode, own_format: bool) -> tuple[Any, int] | None:
        if own_format and self._lent:
            return lent_object(self._c, key, decode)
        if own_format and self._decoded is not None:
            decoded: tuple[Any, int] | None = self._decoded(key)
            return decoded
        return super().get_object(key, decode, own_format)

    def get_objects(
        self, keys: Sequence[Any], decode: Decode, own_format: bool
    ) -> list[tuple[Any, int] | None]:
        if own_format and self._decoded_batch is not None:
            return list(self._decoded_batch(keys))
        return super().get_objects(keys, decode, own_format)


def lent_object(connector: Any, key: Any, decode: Decode) -> tuple[Any, int] | None:
    """The object under ``key`` of a lending connector (``get_lent``).

    Objects built from a copy of their bytes (``bytes``, ``str`` ...) are built from the
    lent ones: one copy, from memory the connector keeps. Others (arrays) are built on
    memory of their own (``keep()``), without a copy.
    """

    def use(view: memoryview, keep: Callable[[], BytesLike]) -> tuple[Any, int]:
        if copies_out(view):
            return decode(view), view.nbytes
        return decode(keep()), view.nbytes

    result: tuple[Any, int] | None = connector.get_lent(key, use, None)
    return result


def adapt(connector: Any) -> ConnectorBase[Any]:
    """``connector`` itself if it is a :class:`ConnectorBase`; else a wrapper that gives
    it the base class's methods, using the capability protocols it implements.

    Done once per connector (a :class:`~tether.store.Store` does it when it is made).
    """
    if isinstance(connector, ConnectorBase):
        return connector
    return _Adapted(connector)
