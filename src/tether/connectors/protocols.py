"""The contracts every connector implements.

A connector is a byte-level client of one mediated channel (a directory, a Redis server, a
shared-memory namespace ...). It knows nothing about Python objects: bytes go in, a key
comes out, and the key gets the bytes back. Keys are small ``NamedTuple`` instances of
plain values so that they pickle in a few dozen bytes.

Every connector in :mod:`tether.connectors` passes the same conformance suite
(:mod:`tether.testing.connectors`), which other connectors can run too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, Self, TypeVar, runtime_checkable

from tether.serialize import BytesLike

__all__ = [
    'Connector',
    'DeferrableConnector',
    'KeyT',
    'VectoredConnector',
]

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
