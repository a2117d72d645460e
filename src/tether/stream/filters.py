"""Stream filters by ProxyStore's names (see :mod:`tether.stream.hooks` for more).

A filter is called with an item's metadata and returns ``True`` to drop the item; give
one to ``StreamProducer(filter_=...)`` or ``StreamConsumer(filter_=...)``.
"""

from __future__ import annotations

import random
from typing import Any

from tether.exceptions import InvalidArgumentError

__all__ = ['NullFilter', 'SamplingFilter']


class NullFilter:
    """Drops nothing."""

    def __call__(self, metadata: dict[str, Any]) -> bool:
        return False


class SamplingFilter:
    """Drops each item with probability ``p`` (keeps it with ``1 - p``), as ProxyStore's.

    Args:
        p: Probability that an item is dropped, in ``[0, 1]``.
        seed: Seed of a random generator of the filter's own, for reproducible runs
            (default: the :mod:`random` module's generator).

    Raises:
        InvalidArgumentError: if ``p`` is outside ``[0, 1]`` (also a ``ValueError``).
    """

    def __init__(self, p: float, seed: int | None = None) -> None:
        if not 0.0 <= p <= 1.0:
            raise InvalidArgumentError(f'sampling probability must be in [0, 1], not {p}')
        self.p = p
        self._rng = None if seed is None else random.Random(seed)

    def __call__(self, metadata: dict[str, Any]) -> bool:
        draw = random.random() if self._rng is None else self._rng.random()
        return draw < self.p
