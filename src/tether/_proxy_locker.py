"""ProxyLocker: a proxy held so that nothing uses (and so resolves) it by accident.

Private to :mod:`tether.proxy`, which re-exports it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

if TYPE_CHECKING:
    from tether._proxy_core import Proxy

__all__ = ['ProxyLocker']

T = TypeVar('T')


class ProxyLocker(Generic[T]):
    """Holds a proxy so that nothing can use (and so resolve) it by accident.

    Every attribute of the locker is refused except :meth:`unlock`, which hands the proxy
    back. Pickling a locker pickles the proxy (never its target).

    Args:
        proxy: The proxy to lock.
    """

    __slots__ = ('__dict__', '_proxy')

    def __init__(self, proxy: Proxy[T]) -> None:
        object.__setattr__(self, '_proxy', proxy)

    def __getattribute__(self, name: str) -> Any:
        if name == '_proxy':
            raise AttributeError('a ProxyLocker hides its proxy: call unlock() to get it')
        return object.__getattribute__(self, name)

    def __repr__(self) -> str:
        return 'ProxyLocker(<locked proxy>)'

    def __reduce__(self) -> tuple[Any, ...]:
        return (ProxyLocker, (self.unlock(),))

    def unlock(self) -> Proxy[T]:
        """Return the locked proxy (unresolved if it was)."""
        return cast('Proxy[T]', _locker_proxy(self))


_locker_proxy = cast(Callable[[ProxyLocker[Any]], Any], ProxyLocker._proxy.__get__)  # type: ignore[attr-defined]
