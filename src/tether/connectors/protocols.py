"""The contracts every connector implements.

A connector is a byte-level client of one mediated channel (a directory, a Redis server, a
shared-memory namespace ...). It knows nothing about Python objects: bytes go in, a key
comes out, and the key gets the bytes back. Keys are small ``NamedTuple`` instances of
plain values so that they pickle in a few dozen bytes.

Every connector in :mod:`tether.connectors` passes the same conformance suite
(:mod:`tether.testing.connectors`), which other connectors can run too.

Beyond :class:`Connector`, a connector may offer capabilities, each a runtime-checkable
protocol: :class:`DeferrableConnector` (keys handed out before the data exists: futures,
``update``), :class:`VectoredConnector` (an object written from a list of buffers without
joining them), :class:`VectoredBatchConnector` (several such objects in one call, one
round trip where the channel allows), :class:`BackgroundWriteConnector` (an object whose
bytes cannot change copied in the background, its key handed out at once),
:class:`LendingConnector` (an object's bytes lent for one call, for readers that copy them
out) and :class:`WaitingConnector` (block until a key is set). A
:class:`~tether.store.Store` resolves them once, when it is made (:class:`Capabilities`);
a call that needs one its connector lacks raises
:class:`~tether.exceptions.MissingCapabilityError`, while the optional ones (vectored and
background writes, lent reads, waits) fall back to joining the buffers, writing before
returning, or polling.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, NamedTuple, Protocol, Self, TypeVar, runtime_checkable

from tether.exceptions import MissingCapabilityError
from tether.serialize import BytesLike

__all__ = [
    'BackgroundWriteConnector',
    'Capabilities',
    'Connector',
    'DecodingBatchConnector',
    'DecodingConnector',
    'DeferrableConnector',
    'KeyT',
    'LendingConnector',
    'VectoredBatchConnector',
    'VectoredConnector',
    'WaitingConnector',
]

_R = TypeVar('_R')
_D = TypeVar('_D')
KeyT = TypeVar('KeyT', bound=NamedTuple)


@runtime_checkable
class Connector(Protocol[KeyT]):
    """Bytes in, key out.

    ``get`` returns ``None`` for a key that is not (or no longer) in the channel;
    ``evict`` of a missing key is not an error. Channel failures raise
    :class:`~tether.exceptions.ConnectorError`.
    """

    def close(self) -> None:
        """Release the connector's resources (connections, file handles)."""
        ...

    def config(self) -> dict[str, Any]:
        """Return the keyword arguments that rebuild this connector elsewhere."""
        ...

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Self:
        """Build a connector from :meth:`config`'s output."""
        ...

    def evict(self, key: KeyT) -> None:
        """Remove the object under ``key`` (no error if it is missing)."""
        ...

    def exists(self, key: KeyT) -> bool:
        """Return whether an object is stored under ``key``."""
        ...

    def get(self, key: KeyT) -> BytesLike | None:
        """Return the bytes under ``key``, or ``None`` if there are none."""
        ...

    def get_batch(self, keys: Sequence[KeyT]) -> list[BytesLike | None]:
        """Return the bytes under each key, in order (``None`` where missing)."""
        ...

    def put(self, data: BytesLike) -> KeyT:
        """Store ``data`` and return its new key."""
        ...

    def put_batch(self, datas: Sequence[BytesLike]) -> list[KeyT]:
        """Store each item and return their keys, in order."""
        ...


@runtime_checkable
class DeferrableConnector(Connector[KeyT], Protocol[KeyT]):
    """A connector that can hand out a key before the data exists (used by futures)."""

    def new_key(self, data: BytesLike | None = None) -> KeyT:
        """Return a fresh key, storing ``data`` under it if given."""
        ...

    def set(self, key: KeyT, data: BytesLike) -> None:
        """Store ``data`` under a key from :meth:`new_key`."""
        ...


@runtime_checkable
class VectoredConnector(Connector[KeyT], Protocol[KeyT]):
    """A connector that writes a list of buffers as one object without joining them.

    The Store uses this, when the connector offers it, to send large arrays from their own
    memory (vectored writes) instead of first copying them into one bytes object.
    """

    def put_parts(self, parts: Sequence[BytesLike]) -> KeyT:
        """Store the concatenation of ``parts`` and return its key."""
        ...


@runtime_checkable
class BackgroundWriteConnector(Connector[KeyT], Protocol[KeyT]):
    """A connector that can copy an object in the background, its key usable at once.

    :meth:`Store.put <tether.store.Store.put>`, ``proxy`` and ``proxy_serialized`` use
    this (without a custom serializer or connector keywords), so that the caller goes on
    (sends the task that carries the key ...) while a large object is copied. Readers of
    the key that come before the copy is complete wait for it; a reader never sees part
    of the object. The connector decides what it copies in the background: only objects
    whose memory cannot change (``bytes``), never memory the caller may still change.
    """

    def put_parts_background(self, parts: Sequence[BytesLike]) -> tuple[KeyT, Future[None]]:
        """Store the concatenation of ``parts``; return its key and a future that
        completes (or fails) when the object is written. ``parts`` must not change."""
        ...


@runtime_checkable
class LendingConnector(Connector[KeyT], Protocol[KeyT]):
    """A connector that can lend an object's bytes for one call.

    :meth:`Store.get <tether.store.Store.get>` uses this, with the default deserializer,
    to build objects that copy their bytes anyway (``bytes``, ``str`` ...) straight from
    memory the connector keeps and reuses, instead of from memory of their own.
    """

    def get_lent(
        self,
        key: KeyT,
        use: Callable[[memoryview, Callable[[], BytesLike]], _R],
        default: _D,
    ) -> _R | _D:
        """Return ``use(view, keep)`` for the object under ``key``, or ``default``.

        ``view`` is the object's bytes, read-only and valid only until ``use`` returns:
        ``use`` must copy what it needs and keep nothing that refers to ``view``.
        ``keep()`` returns the object's bytes as ``get()`` would (memory that stays
        valid), for a ``use`` that finds it needs them after all.
        """
        ...


@runtime_checkable
class DecodingConnector(Connector[KeyT], Protocol[KeyT]):
    """A connector that deserializes while it reads (with tether's serializer).

    :meth:`Store.get <tether.store.Store.get>` uses it when the store has no serializer
    of its own, so that a large ``bytes`` value is read into its final object rather
    than into a buffer that is then copied (the Redis connector does this).
    """

    def get_decoded(self, key: KeyT) -> tuple[Any, int] | None:
        """Return the object under ``key`` and the bytes it is stored in, or ``None``."""
        ...


@runtime_checkable
class DecodingBatchConnector(DecodingConnector[KeyT], Protocol[KeyT]):
    """A decoding connector that also reads several objects in one call.

    :meth:`Store.get_batch <tether.store.Store.get_batch>` uses it as
    :meth:`Store.get <tether.store.Store.get>` uses :class:`DecodingConnector` (the Redis
    connector: one round trip per server, each large ``bytes`` read into its object).
    """

    def get_decoded_batch(self, keys: Sequence[KeyT]) -> list[tuple[Any, int] | None]:
        """:meth:`~DecodingConnector.get_decoded` of each key, in order."""
        ...


@runtime_checkable
class VectoredBatchConnector(Connector[KeyT], Protocol[KeyT]):
    """A connector that writes several objects, each a list of buffers, in one call.

    :meth:`Store.put_batch <tether.store.Store.put_batch>` and ``proxy_batch`` hand it
    each object's serialized parts without joining them, so a batch copies no more than
    single puts do (Redis sends the whole batch in one round trip).
    """

    def put_parts_batch(self, batch: Sequence[Sequence[BytesLike]]) -> list[KeyT]:
        """Store the concatenation of each item's parts; return their keys, in order."""
        ...


@runtime_checkable
class WaitingConnector(Connector[KeyT], Protocol[KeyT]):
    """A connector that can block until a key has been set (futures wait on it)."""

    def wait(self, key: KeyT, timeout: float | None = None) -> bool:
        """Block until ``key`` holds data; return whether it does (``False``: timed out)."""
        ...


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What one connector can do beyond :class:`Connector`, resolved once.

    Each field is the connector itself, typed as the capability, or ``None`` when it
    lacks it. Build it with :meth:`of`.
    """

    connector: Connector[Any]
    deferrable: DeferrableConnector[Any] | None = None
    vectored: VectoredConnector[Any] | None = None
    vectored_batch: VectoredBatchConnector[Any] | None = None
    background: BackgroundWriteConnector[Any] | None = None
    waiting: WaitingConnector[Any] | None = None
    lending: LendingConnector[Any] | None = None
    decoding: DecodingConnector[Any] | None = None
    decoding_batch: DecodingBatchConnector[Any] | None = None

    @classmethod
    def of(cls, connector: Connector[Any]) -> Capabilities:
        """Check which capability protocols ``connector`` implements."""
        return cls(
            connector,
            deferrable=connector if isinstance(connector, DeferrableConnector) else None,
            vectored=connector if isinstance(connector, VectoredConnector) else None,
            vectored_batch=(connector if isinstance(connector, VectoredBatchConnector) else None),
            background=(connector if isinstance(connector, BackgroundWriteConnector) else None),
            waiting=connector if isinstance(connector, WaitingConnector) else None,
            lending=connector if isinstance(connector, LendingConnector) else None,
            decoding=connector if isinstance(connector, DecodingConnector) else None,
            decoding_batch=(connector if isinstance(connector, DecodingBatchConnector) else None),
        )

    def require_deferrable(self, what: str, where: str = '') -> DeferrableConnector[Any]:
        """Return the connector as a :class:`DeferrableConnector`, or raise.

        Args:
            what: What the caller is doing, for the message (``'back futures'``).
            where: Which store, for the message.

        Raises:
            MissingCapabilityError: if the connector cannot hand out keys in advance.
        """
        if self.deferrable is None:
            raise MissingCapabilityError(
                f'{where or "the store"} ({self.connector!r}) cannot {what}: its connector '
                'is not a DeferrableConnector (no new_key()/set()); use a connector that '
                'is, such as Redis, node, endpoint, file or local',
            )
        return self.deferrable
