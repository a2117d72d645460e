"""The state every proxy carries (its slots), and fast accessors to it.

Private to :mod:`tether.proxy`: the slots live on a base class so that each part of the
proxy machinery (resolving, metadata, the class itself) reads them by descriptor,
never through the proxy's forwarding ``__getattribute__``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, cast

from tether._missing import MISSING

__all__ = [
    'ENGINE_SPECIAL_CLASSES',
    'MISSING_TARGET',
    'SLOTS',
    'UNHASHABLE',
    'ProxySlots',
    'set_class',
    'set_slot',
    'slot_class',
    'slot_factory',
    'slot_hash',
    'slot_lock',
    'slot_pending',
    'slot_shown',
    'slot_target',
    'slot_trace',
]

MISSING_TARGET: Any = MISSING
"""The missing-target marker: what stands for "no target (yet)" (``Proxy(target=...)``)."""


class _Unhashable:
    __slots__ = ()

    def __repr__(self) -> str:
        return '<unhashable>'


UNHASHABLE: Any = _Unhashable()
"""Marker stored in the hash slot when the target is known to be unhashable."""

# The names below are served by the proxy itself, never forwarded to the target.
SLOTS = (
    '__proxy_factory__',
    '__proxy_target__',
    '__proxy_class__',
    '__proxy_shown__',
    '__proxy_hash__',
    '__proxy_lock__',
    '__proxy_pending__',
    '__proxy_trace__',
)


class ProxySlots:
    """Base of :class:`tether.proxy.Proxy`: holds its state, forwards nothing."""

    __slots__ = SLOTS


set_slot = object.__setattr__
slot_factory = cast(Callable[[Any], Any], ProxySlots.__proxy_factory__.__get__)  # type: ignore[attr-defined]
slot_target = cast(Callable[[Any], Any], ProxySlots.__proxy_target__.__get__)  # type: ignore[attr-defined]
slot_class = cast(Callable[[Any], Any], ProxySlots.__proxy_class__.__get__)  # type: ignore[attr-defined]
slot_shown = cast(Callable[[Any], Any], ProxySlots.__proxy_shown__.__get__)  # type: ignore[attr-defined]
slot_hash = cast(Callable[[Any], Any], ProxySlots.__proxy_hash__.__get__)  # type: ignore[attr-defined]
slot_lock = cast(Callable[[Any], Any], ProxySlots.__proxy_lock__.__get__)  # type: ignore[attr-defined]
slot_pending = cast(Callable[[Any], Any], ProxySlots.__proxy_pending__.__get__)  # type: ignore[attr-defined]
slot_trace = cast(Callable[[Any], Any], ProxySlots.__proxy_trace__.__get__)  # type: ignore[attr-defined]

# Classes engines handle by ``isinstance`` in ways that would resolve a proxy: Dask's
# parse_input walks dicts, lists, tuples and sets to find futures in task arguments; Ray
# sends ``bytes`` raw (and, when that fails, formats the argument in its error report).
# A proxy of one tells engine code it is a Proxy even when its class is known, so the
# class goes only to ``__proxy_class__``; the class in ``__proxy_shown__`` is told to
# anyone without asking who asks.
ENGINE_SPECIAL_CLASSES: Final[tuple[type, ...]] = (
    dict,
    list,
    tuple,
    set,
    frozenset,
    bytes,
    bytearray,
    memoryview,
)
"""Classes (with their subclasses) whose proxies engine code is always told are ``Proxy``."""
_special_memo: dict[type, bool] = {}


def set_class(proxy: Any, cls: type | None) -> None:
    """Record the target's class (told to engine code only if not engine-special)."""
    set_slot(proxy, '__proxy_class__', cls)
    shown = cls
    if cls is not None:
        special = _special_memo.get(cls)
        if special is None:
            try:
                special = issubclass(cls, ENGINE_SPECIAL_CLASSES)
            except TypeError:
                special = False
            if len(_special_memo) < 4096:
                _special_memo[cls] = special
        if special:
            shown = None
    set_slot(proxy, '__proxy_shown__', shown)
