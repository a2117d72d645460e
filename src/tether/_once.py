"""An attribute made on first use, once, by whichever thread comes first (double-checked
locking): one function instead of the same read / lock / read again / make steps written in
every class that creates something lazily.

A kit module (any tether package may import it): it depends on nothing of tether.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

__all__ = ['create_once']

T = TypeVar('T')


def create_once(
    owner: object, name: str, lock: AbstractContextManager[Any], factory: Callable[[], T]
) -> T:
    """``owner.<name>``, set to ``factory()`` first if it is ``None``.

    The attribute is read without the lock; only when it is ``None`` is ``lock`` taken, the
    attribute read again and, still ``None``, made by ``factory()`` (under the lock, so once
    however many threads ask at the same time) and set. Setting the attribute back to
    ``None`` (under the same lock) makes the next call create it again.
    """
    value: T | None = getattr(owner, name)
    if value is None:
        with lock:
            value = getattr(owner, name)
            if value is None:
                value = factory()
                setattr(owner, name, value)
    return value
