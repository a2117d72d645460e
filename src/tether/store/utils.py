"""Helpers for store proxies."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether.exceptions import NotAStoreProxyError
from tether.proxy import Proxy, get_factory
from tether.store._registry import registered_store
from tether.store.factory import StoreFactory

if TYPE_CHECKING:
    from tether.store._store import Store

__all__ = ['get_key', 'get_store', 'get_store_factory']


def get_store_factory(proxy: Proxy[Any], what: str = 'get_store_factory()') -> StoreFactory[Any]:
    """Return the factory of a store proxy (does not resolve it).

    Raises:
        NotAStoreProxyError: if ``proxy`` was not made by a store (a ``StoreError`` and
            a ``TypeError``); the message says it was ``what`` that needed one.
    """
    factory = get_factory(proxy)
    if not isinstance(factory, StoreFactory):
        raise NotAStoreProxyError(
            f'{what} of a proxy whose factory is {type(factory).__name__}: not a store '
            'proxy (its factory is not a StoreFactory)',
        )
    return factory


def get_key(proxy: Proxy[Any]) -> Any:
    """Return the connector key behind a store proxy (does not resolve it).

    Raises:
        NotAStoreProxyError: if ``proxy`` was not made by a store (a ``StoreError`` and
            a ``TypeError``).
    """
    return get_store_factory(proxy, 'get_key()').key


def get_store(name_or_proxy: Any) -> Store[Any] | None:
    """Return the store registered under a name (or the store of a proxy), or ``None``.

    For a proxy (of any target, a ``str`` included), the store of this process that its
    factory reads from (registered under its name with its config), or ``None``. It
    does not resolve the proxy.

    Raises:
        NotAStoreProxyError: if ``name_or_proxy`` is a proxy not made by a store (its
            factory is not a :class:`~tether.store.factory.StoreFactory`), as ProxyStore's
            ``get_store`` raises ``ProxyStoreFactoryError`` (a ``StoreError`` too).
    """
    # Proxy first: a proxy of a str must not be taken for a name (type(), not isinstance,
    # so that nothing resolves).
    if issubclass(type(name_or_proxy), Proxy):
        return get_store_factory(name_or_proxy, 'get_store()').current_store()
    return registered_store(name_or_proxy)
