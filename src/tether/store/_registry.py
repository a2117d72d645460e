"""The per-process registry of stores, by name and config.

A proxy resolves through a store built from its own config: a store registered under the
same name with a different config (another connector, another prefix) is never used for
it. Such a proxy gets a store built from its config, kept apart from the registry by name
(one per distinct config and process).
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from tether.exceptions import StoreExistsError

if TYPE_CHECKING:
    from tether.store._store import Store
    from tether.store.config import StoreConfig

__all__ = [
    'get_or_create_store',
    'get_store',
    'register_store',
    'unregister_store',
]

logger = logging.getLogger(__name__)

_stores: dict[str, Store[Any]] = {}
# Stores built for a config whose name is registered with a different config.
_by_config: dict[str, Store[Any]] = {}
_lock = threading.RLock()


def _new_lock_after_fork() -> None:
    # A child forked while another thread held the lock must not inherit it held.
    global _lock
    _lock = threading.RLock()


os.register_at_fork(after_in_child=_new_lock_after_fork)


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
    """Return the store registered under a name (or the store of a proxy), or ``None``.

    For a proxy (of any target, a ``str`` included), the store of this process that its
    factory reads from (registered under its name with its config), or ``None``. It
    does not resolve the proxy.
    """
    from tether.proxy import Proxy

    # Proxy first: a proxy of a str must not be taken for a name (type(), not isinstance,
    # so that nothing resolves).
    if issubclass(type(name_or_proxy), Proxy):
        return _store_of_proxy(name_or_proxy)
    with _lock:
        return _stores.get(name_or_proxy)


def _store_of_proxy(proxy: Any) -> Store[Any] | None:
    from tether.proxy import get_factory
    from tether.store.factory import StoreFactory

    factory = get_factory(proxy)
    if not isinstance(factory, StoreFactory):
        return None
    own = factory._store() if factory._store is not None else None
    if own is not None and not own.closed:
        return own
    config = factory.store_config
    with _lock:
        store = _stores.get(config.name)
        if store is not None and _same_config(store, config):
            return store
        return _by_config.get(config.model_dump_json())


def unregister_store(name_or_store: Any) -> None:
    """Remove a store from the registry (no error if it is not there)."""
    name = name_or_store if isinstance(name_or_store, str) else name_or_store.name
    with _lock:
        _stores.pop(name, None)


def get_or_create_store(config: StoreConfig, register: bool = True) -> Store[Any]:
    """Return the store for ``config``: the one registered under its name if it has this
    config, else one built from the config.

    A store registered under ``config.name`` with a different config is never returned:
    a store is built from ``config`` and kept for later calls with the same config
    (not under the name, which stays with the registered store).
    """
    from tether.store._store import Store

    with _lock:
        store = _stores.get(config.name)
        if store is not None and not store.closed and _same_config(store, config):
            return store
        if store is None or store.closed:
            store = Store.from_config(config)
            if register:
                _stores[config.name] = store
            return store
        marker = config.model_dump_json()
        other = _by_config.get(marker)
        if other is None or other.closed:
            logger.info(
                'store %r is registered with another config (%s); building a store for '
                'the config a proxy carries',
                config.name,
                _describe_difference(store.config(), config),
            )
            other = Store.from_config(config)
            _by_config[marker] = other
        return other


def _same_config(store: Store[Any], config: StoreConfig) -> bool:
    mine = store.config()
    return mine is config or mine == config


def _describe_difference(a: StoreConfig, b: StoreConfig) -> str:
    """Say which fields of two store configs differ (for error messages and logs)."""
    diffs = []
    for field in type(a).model_fields:
        va, vb = getattr(a, field), getattr(b, field)
        if field == 'connector_config' and isinstance(va, dict) and isinstance(vb, dict):
            for k in sorted(set(va) | set(vb)):
                if va.get(k) != vb.get(k):
                    diffs.append(f'connector_config[{k!r}]: {va.get(k)!r} != {vb.get(k)!r}')
        elif va != vb:
            diffs.append(f'{field}: {va!r} != {vb!r}')
    return '; '.join(diffs) or 'no difference'
