"""In-process connector: a dictionary. For tests and single-process programs.

Objects live in this process only. A :class:`LocalConnector` rebuilt from its config in
the same process (for example by a proxy resolving through the store registry) attaches
to the same dictionary; in another process it starts empty, so its proxies do not resolve
there (they raise :class:`~tether.exceptions.ProxyResolveMissingKeyError`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any, NamedTuple

from tether.connectors._keyed import KeyedWrites
from tether.connectors._util import new_id
from tether.connectors.config import ConnectorConfigModel
from tether.exceptions import ConnectorClosedError
from tether.serialize import BytesLike

__all__ = ['LocalConnector', 'LocalConnectorConfig', 'LocalKey']

_live: weakref.WeakValueDictionary[str, _Storage] = weakref.WeakValueDictionary()
_live_lock = threading.Lock()


class _Storage(dict[str, bytes]):
    """A dict that can be weakly referenced."""


class LocalKey(NamedTuple):
    """Key of an object in a :class:`LocalConnector`."""

    id: str


class LocalConnectorConfig(ConnectorConfigModel):
    """Configuration of a :class:`LocalConnector` (see its arguments)."""

    store_id: str | None = None
    include_data_in_config: bool = False
    data: dict[str, bytes] | None = None


class LocalConnector(KeyedWrites[LocalKey]):
    """A connector that keeps objects in a dictionary in this process.

    Args:
        store_id: Identity of the backing dictionary. Connectors of one process made
            with the same ``store_id`` share their objects. Defaults to a fresh id. A
            ``dict`` instead (ProxyStore's ``store_dict``) is used as the dictionary:
            connectors given the same one share it.
        include_data_in_config: Put a copy of the objects in :meth:`config`, so that a
            connector rebuilt from it in another process starts with them (ProxyStore's
            option, for tests: the copy is of the moment ``config()`` is called, and a
            store keeps its first config).
        data: Objects to start with, by key id, if this process has none under
            ``store_id`` yet (what ``config()`` carries with ``include_data_in_config``).
    """

    config_model = LocalConnectorConfig

    def __init__(
        self,
        store_id: str | dict[Any, Any] | None = None,
        *,
        include_data_in_config: bool = False,
        data: dict[str, bytes] | None = None,
    ) -> None:
        given: dict[Any, Any] | None = None
        if isinstance(store_id, dict):
            # ProxyStore's LocalConnector(store_dict): connectors given the same dict
            # share it (a connector rebuilt from the config gets a dictionary of its own).
            given, store_id = store_id, None
        self.store_id = store_id or new_id()
        self.include_data_in_config = include_data_in_config
        self.settings = LocalConnectorConfig(
            store_id=self.store_id,
            include_data_in_config=include_data_in_config,
        )
        with _live_lock:
            storage = _live.get(self.store_id)
            if storage is None:
                storage = _Storage(data or {})
                _live[self.store_id] = storage
        self._data: dict[str, bytes] | None = storage if given is None else given

    def config(self) -> dict[str, Any]:
        """Return the configuration (with a copy of the objects if asked to include them)."""
        config = super().config()
        if self.include_data_in_config:
            config['data'] = dict(self._d())
        return config

    def __repr__(self) -> str:
        return f'LocalConnector(store_id={self.store_id!r})'

    def _d(self) -> dict[str, bytes]:
        if self._data is None:
            raise ConnectorClosedError(f'{self!r} is closed')
        return self._data

    def close(self) -> None:
        """Detach from the dictionary (other connectors of the same id keep it)."""
        self._data = None

    def evict(self, key: LocalKey) -> None:
        """Remove the object under ``key``."""
        self._d().pop(key.id, None)

    def exists(self, key: LocalKey) -> bool:
        """Return whether ``key`` is stored."""
        return key.id in self._d()

    def _new_key(self) -> LocalKey:
        return LocalKey(new_id())

    def _write(self, key: LocalKey, parts: Sequence[BytesLike]) -> None:
        self._d()[key.id] = b''.join(parts)

    def get(self, key: LocalKey) -> BytesLike | None:
        """Return the bytes under ``key`` or ``None``."""
        return self._d().get(key.id)
