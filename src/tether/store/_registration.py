"""``store_registration``: register stores for the length of a ``with`` block."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tether.store._registry import register_store, registered_store, unregister_store

if TYPE_CHECKING:
    from tether.store._store import Store

__all__ = ['store_registration']


@contextlib.contextmanager
def store_registration(*stores: Store[Any], exist_ok: bool = False) -> Iterator[None]:
    """Register ``stores`` on entry and unregister them on exit.

    ::

        with Store('s', LocalConnector()) as store, store_registration(store):
            ...  # proxies of store resolve through the registry here

    Args:
        stores: The stores.
        exist_ok: Replace stores already registered under the same names (those are
            not restored on exit).

    Raises:
        StoreExistsError: if a store of one of those names is registered and
            ``exist_ok`` is false (the stores registered before it are unregistered).
    """
    done: list[Store[Any]] = []
    try:
        for store in stores:
            register_store(store, exist_ok=exist_ok)
            done.append(store)
        yield
    finally:
        for store in done:
            if registered_store(store.name) is store:
                unregister_store(store.name)
