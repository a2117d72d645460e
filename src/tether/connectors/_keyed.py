"""The write-side methods shared by connectors that write each object under a new key."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from tether.connectors._context import ClosingContext
from tether.connectors.base import ConnectorBase
from tether.connectors.config import ConfiguredConnector
from tether.serialize import BytesLike

__all__ = ['KeyedWrites']

K = TypeVar('K')


class KeyedWrites(ConfiguredConnector, ClosingContext, ConnectorBase[K]):
    """Mixin: ``put``/``put_parts``/``put_batch``/``put_parts_batch``/``new_key``/``set``/
    ``get_batch``.

    A subclass provides ``_new_key()``, ``_write(key, parts)`` (atomic: a reader sees the
    whole object or none of it) and ``get(key)``; ``config``/``from_config`` go through its
    ``config_model`` (see :mod:`tether.connectors.config`).
    """

    def _new_key(self) -> K:
        raise NotImplementedError

    def _write(self, key: K, parts: Sequence[BytesLike]) -> None:
        raise NotImplementedError

    def get(self, key: K) -> BytesLike | None:
        """Return the bytes under ``key`` or ``None``."""
        raise NotImplementedError

    def put(self, data: BytesLike) -> K:
        """Store ``data`` and return its new key."""
        return self.put_parts([data])

    def put_parts(self, parts: Sequence[BytesLike]) -> K:
        """Store the concatenation of ``parts`` (written without joining them first)."""
        key = self._new_key()
        self._write(key, parts)
        return key

    def put_parts_batch(self, batch: Sequence[Sequence[BytesLike]]) -> list[K]:
        """Store each item's parts as one object (none joined first); return the keys."""
        return [self.put_parts(parts) for parts in batch]

    def put_batch(self, datas: Sequence[BytesLike]) -> list[K]:
        """Store each item and return their keys, in order."""
        return [self.put(d) for d in datas]

    def get_batch(self, keys: Sequence[K]) -> list[BytesLike | None]:
        """Return the bytes under each key, in order (``None`` where missing)."""
        return [self.get(k) for k in keys]

    def new_key(self, data: BytesLike | None = None) -> K:
        """Reserve a fresh key; nothing is stored under it until :meth:`set`.

        ``data`` (the object the key will hold) is accepted for connectors that choose
        where to put it by its size; it is not stored.
        """
        return self._new_key()

    def set(self, key: K, data: BytesLike) -> None:
        """Store ``data`` under ``key`` (atomically replacing what was there)."""
        self._write(key, [data])
