"""The per-item hooks of producers and consumers: filters, samplers and aggregators.

(Formerly ``tether.stream.plugins``, an alias kept for imports: in tether, "plugins"
means only the framework integrations of :mod:`tether.plugins`.)

* A **filter** is called with an item's metadata and returns ``True`` to *drop* the item
  (as in ProxyStore). Producers filter before storing anything; consumers filter before
  making a proxy (the dropped object is evicted if its event says ``evict``).
* A **sampler** is called with an item's metadata and returns ``True`` to *keep* it.
* An **aggregator** turns a batch of objects (``batch_size`` of them) into one object,
  sent with the union of the batch's metadata (later keys win).

Any callable with the right signature works; these are the common ones.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from tether._missing import MISSING as _MISSING

__all__ = [
    'Aggregator',
    'EveryNthSampler',
    'Filter',
    'MetadataFilter',
    'RandomSampler',
    'Sampler',
    'concatenate',
    'to_list',
]

Filter = Callable[[dict[str, Any]], bool]
Sampler = Callable[[dict[str, Any]], bool]
Aggregator = Callable[[list[Any]], Any]


class MetadataFilter:
    """Drop items whose metadata does not match every ``key=value`` given.

    Example: ``MetadataFilter(kind='frame')`` keeps only items with ``kind == 'frame'``.
    """

    def __init__(self, **required: Any) -> None:
        self.required = required

    def __call__(self, metadata: dict[str, Any]) -> bool:
        return any(metadata.get(k, _MISSING) != v for k, v in self.required.items())


class RandomSampler:
    """Keep each item with probability ``probability`` (seeded for reproducibility)."""

    def __init__(self, probability: float, seed: int | None = None) -> None:
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f'sampling probability must be in [0, 1], not {probability}')
        self.probability = probability
        self._rng = random.Random(seed)

    def __call__(self, metadata: dict[str, Any]) -> bool:
        return self._rng.random() < self.probability


class EveryNthSampler:
    """Keep the first item and every ``n``-th after it."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f'n must be at least 1, not {n}')
        self.n = n
        self._count = 0

    def __call__(self, metadata: dict[str, Any]) -> bool:
        keep = self._count % self.n == 0
        self._count += 1
        return keep


def to_list(objs: list[Any]) -> list[Any]:
    """Aggregate a batch into a list of its objects."""
    return list(objs)


def concatenate(objs: Sequence[Any]) -> Any:
    """Aggregate a batch of bytes, lists or NumPy arrays by concatenating them."""
    first = objs[0]
    if isinstance(first, bytes | bytearray):
        return b''.join(objs)
    if isinstance(first, list):
        return [x for o in objs for x in o]
    if type(first).__module__ == 'numpy':
        import numpy as np

        return np.concatenate(objs)
    raise TypeError(f'cannot concatenate objects of type {type(first).__name__}')
