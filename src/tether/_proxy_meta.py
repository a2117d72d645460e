"""What a proxy knows about its target without resolving it (class, hash), as the API
for proxy subclasses and for code that builds proxies (stores).

Private to :mod:`tether.proxy`, which re-exports the public names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from tether._proxy_slots import (
    MISSING_TARGET,
    UNHASHABLE,
    set_class,
    set_slot,
    slot_class,
    slot_factory,
    slot_hash,
    slot_target,
)

if TYPE_CHECKING:
    from tether._proxy_core import Proxy

__all__ = [
    'ProxyMetadata',
    'get_metadata',
    'metadata_of',
    'pickled_metadata',
    'preset_target',
    'set_metadata',
    'set_target',
]

T = TypeVar('T')


class ProxyMetadata(NamedTuple):
    """What a proxy knows about its target without resolving it; pickled with the proxy.

    Attributes:
        target_class: The target's class (``isinstance`` and ``__class__`` answer from
            it), or ``None`` if unknown.
        target_hash: The target's hash (``hash`` answers from it), or ``None`` if unknown.
        unhashable: The target is known to be unhashable (``hash`` raises ``TypeError``
            without resolving).
    """

    target_class: type | None = None
    target_hash: int | None = None
    unhashable: bool = False


def get_metadata(proxy: Proxy[Any]) -> ProxyMetadata:
    """Return what ``proxy`` knows about its target (does not resolve)."""
    h = slot_hash(proxy)
    if h is UNHASHABLE:
        return ProxyMetadata(slot_class(proxy), None, True)
    return ProxyMetadata(slot_class(proxy), h, False)


def set_metadata(proxy: Proxy[Any], metadata: ProxyMetadata) -> None:
    """Replace what ``proxy`` knows about its target (its target, if any, stays)."""
    set_class(proxy, metadata.target_class)
    set_slot(proxy, '__proxy_hash__', UNHASHABLE if metadata.unhashable else metadata.target_hash)


def metadata_of(obj: Any) -> ProxyMetadata:
    """Return the metadata a proxy of ``obj`` carries: its class and hash (never raises)."""
    if type(obj).__hash__ is None:
        return ProxyMetadata(type(obj), None, True)
    try:
        return ProxyMetadata(type(obj), hash(obj), False)
    except TypeError:
        return ProxyMetadata(type(obj), None, True)
    except Exception:
        return ProxyMetadata(type(obj))  # hashing failed otherwise: unknown, hash() resolves


def set_target(proxy: Proxy[T], target: T) -> None:
    """Make ``proxy`` resolved to ``target`` now, without calling its factory.

    For code that builds a proxy of an object at hand (a store's ``proxy()``). The
    factory is kept (it still travels when the proxy is pickled).
    """
    set_slot(proxy, '__proxy_target__', target)


def _target_hash(obj: Any) -> Any:
    """The hash to cache for ``obj`` (``UNHASHABLE`` when it has none)."""
    meta = metadata_of(obj)
    return UNHASHABLE if meta.unhashable else meta.target_hash


def preset_target(proxy: Any, target: Any, cache_defaults: bool) -> None:
    """``Proxy(target=...)``: start resolved, and with ``cache_defaults`` know the
    target's class and hash (so an unpickled copy answers them unresolved)."""
    set_slot(proxy, '__proxy_target__', target)
    if cache_defaults:
        if slot_class(proxy) is None:
            set_class(proxy, type(target))
        if slot_hash(proxy) is None:
            set_slot(proxy, '__proxy_hash__', _target_hash(target))


def pickled_metadata(proxy: Any) -> tuple[type | None, int | str | None]:
    """The class and hash a pickled proxy carries (``'u'`` for a known unhashable)."""
    cls = slot_class(proxy)
    if cls is None and not getattr(slot_factory(proxy), 'target_differs', False):
        target = slot_target(proxy)
        if target is not MISSING_TARGET:
            cls = type(target)
    if cls is not None and '<locals>' in getattr(cls, '__qualname__', '<locals>'):
        cls = None
    h = slot_hash(proxy)
    if h is UNHASHABLE:
        h = 'u'
    return cls, h
