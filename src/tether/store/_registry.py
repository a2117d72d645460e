"""The per-process registry of stores, by name."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from tether.exceptions import StoreExistsError

if TYPE_CHECKING:
    from tether.store._store import Store
    from tether.store.config import StoreConfig

__all__ = ['get_or_create_store', 'get_store', 'register_store', 'unregister_store']

_stores: dict[str, Store[Any]] = {}
_lock = threading.RLock()


def register_store(store: Store[Any], exist_ok: bool = False) -> None:
    """Register ``store`` in this process under its name.

    Raises:
        StoreExistsError: if a store of that name (this one included: registering twice
            is a mistake, as in ProxyStore) is registered and ``exist_ok`` is false.
    """
    with _lock:
        current = _stores.get(store.name)
        if current is not None and not exist_ok:
            raise StoreExistsError(
                f'a store named {store.name!r} is already registered in this process; '
                'unregister it first or pick another name',
            )
        _stores[store.name] = store


def get_store(name_or_proxy: Any) -> Store[Any] | None:
    """Return the store registered under a name (or the store of a proxy), or ``None``."""
    if not isinstance(name_or_proxy, str):
        from tether.proxy import get_factory
        from tether.store.factory import StoreFactory

        factory = get_factory(name_or_proxy)
        if not isinstance(factory, StoreFactory):
            return None
        name_or_proxy = factory.store_config.name
    with _lock:
        return _stores.get(name_or_proxy)


def unregister_store(name_or_store: Any) -> None:
    """Remove a store from the registry (no error if it is not there)."""
    name = name_or_store if isinstance(name_or_store, str) else name_or_store.name
    with _lock:
        _stores.pop(name, None)


def get_or_create_store(config: StoreConfig, register: bool = True) -> Store[Any]:
    """Return the store registered under ``config.name``, building it if needed."""
    from tether.store._store import Store

    with _lock:
        store = _stores.get(config.name)
        if store is None:
            store = Store.from_config(config)
            if register:
                _stores[config.name] = store
        return store
