"""Small helpers shared by connector implementations."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar

from tether.serialize import BytesLike

__all__ = ['found_values', 'glob_escape', 'new_id', 'per_group', 'total_size']

_I = TypeVar('_I')
_G = TypeVar('_G', bound=Hashable)
_R = TypeVar('_R')


def new_id() -> str:
    """Return a fresh random object id (32 hex characters)."""
    return uuid.uuid4().hex


def total_size(parts: Sequence[BytesLike]) -> int:
    """Return the number of bytes in ``parts``."""
    return sum(memoryview(p).nbytes for p in parts)


def glob_escape(text: str) -> str:
    """Escape the glob characters of ``text`` (``* ? [ ] \\``) for Redis ``MATCH``/``KEYS``.

    ``glob_escape(prefix) + '*'`` matches the keys that start with ``prefix`` literally.
    """
    return ''.join('\\' + c if c in '*?[]\\' else c for c in text)


def per_group(
    items: Sequence[_I],
    group_of: Callable[[_I], _G],
    run: Callable[[_G, list[int]], Iterable[_R]],
) -> list[_R]:
    """``run(group, indexes)`` once per group of ``items``, the results in the items' order.

    A batch split by what serves each item (its server, endpoint or connector):
    ``group_of`` names an item's group, ``run`` serves the items at ``indexes`` (one
    request) and returns one result for each of them, in order.
    """
    groups: dict[_G, list[int]] = defaultdict(list)
    for i, item in enumerate(items):
        groups[group_of(item)].append(i)
    out: list[Any] = [None] * len(items)
    for group, idx in groups.items():
        for i, result in zip(idx, run(group, idx), strict=True):
            out[i] = result
    return out


def found_values(
    found: Sequence[bool] | None, payloads: Iterable[BytesLike], n: int
) -> list[BytesLike | None]:
    """The values of a ``GET`` reply for ``n`` keys, in order: the next payload for a key
    found, ``None`` for one missing (``found`` ``None``: none was)."""
    got = iter(payloads)
    return [next(got) if f else None for f in (found or [False] * n)]
