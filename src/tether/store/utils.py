"""Helpers for store proxies."""

from __future__ import annotations

from typing import Any

from tether.proxy import Proxy, get_factory

__all__ = ['get_key']


def get_key(proxy: Proxy[Any]) -> Any:
    """Return the connector key behind a store proxy (does not resolve it).

    Raises:
        TypeError: if ``proxy`` was not made by a store.
    """
    from tether.store.factory import StoreFactory

    factory = get_factory(proxy)
    if not isinstance(factory, StoreFactory):
        raise TypeError(f'{type(factory).__name__} is not a store factory: no key')
    return factory.key
