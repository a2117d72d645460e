"""The per-process registry of stores, by name and config.

A proxy resolves through a store built from its own config: a store registered under the
same name with a different config (another connector, another prefix) is never used for
it. Such a proxy gets a store built from its config, kept apart from the registry by name
(one per distinct config and process).

This module sits below the :class:`~tether.store.Store` class and the factories (which
look stores up here): it knows stores only as values. :mod:`tether.store._store` hands it
the function that builds a store from a config (:func:`set_store_builder`) when it is
imported, which happens whenever any module of :mod:`tether.store` is.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tether.exceptions import StoreError, StoreExistsError

if TYPE_CHECKING:
    from tether.store._store import Store
    from tether.store.config import StoreConfig

__all__ = [
    'get_or_create_store',
    'lookup_store',
    'register_store',
    'registered_store',
    'set_store_builder',
    'unregister_store',
]

logger = logging.getLogger(__name__)

_stores: dict[str, Store[Any]] = {}
# Stores built for a config whose name is registered with a different config.
_by_config: dict[str, Store[Any]] = {}
_lock = threading.RLock()
_builder: Callable[[StoreConfig], Store[Any]] | None = None


def set_store_builder(builder: Callable[[StoreConfig], Store[Any]]) -> None:
    """Set the function that builds a store from its config (``Store.from_config``)."""
    global _builder
    _builder = builder


def _build(config: StoreConfig) -> Store[Any]:
    if _builder is None:  # pragma: no cover - tether.store's __init__ imports _store
        raise StoreError(
            f'cannot build store {config.name!r}: no store builder is set (import tether.store)',
        )
    return _builder(config)


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


def registered_store(name: str) -> Store[Any] | None:
    """Return the store registered under ``name`` in this process, or ``None``."""
    with _lock:
        return _stores.get(name)


def lookup_store(config: StoreConfig) -> Store[Any] | None:
    """Return the store of this process for ``config`` if there is one (never builds).

    That is the store registered under its name if it has this config, else the one
    built earlier for this config by :func:`get_or_create_store`.
    """
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
    with _lock:
        store = _stores.get(config.name)
        if store is not None and not store.closed and _same_config(store, config):
            return store
        if store is None or store.closed:
            store = _build(config)
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
            other = _build(config)
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
