"""A small thread-safe LRU cache of deserialized objects."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Generic, TypeVar

__all__ = ['LRUCache']

K = TypeVar('K')
V = TypeVar('V')

_MISS = object()


class LRUCache(Generic[K, V]):
    """Keeps up to ``maxsize`` items; the least recently used is dropped first."""

    def __init__(self, maxsize: int) -> None:
        if maxsize < 0:
            raise ValueError('cache size must be >= 0')
        self.maxsize = maxsize
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        # Bumped by every evict: a reader that fetched before an evict must not cache.
        self.generation = 0

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: K) -> bool:
        return key in self._data

    def get(self, key: K, default: Any = None) -> Any:
        """Return the cached value (marking it used) or ``default``."""
        with self._lock:
            value = self._data.get(key, _MISS)
            if value is _MISS:
                self.misses += 1
                return default
            self._data.move_to_end(key)
            self.hits += 1
            return value

    def set(self, key: K, value: V, *, generation: int | None = None) -> None:
        """Cache ``value`` under ``key``.

        With ``generation`` (read from :attr:`generation` before the value was fetched),
        nothing is cached if an :meth:`evict` ran since: the value may be gone.
        """
        if self.maxsize == 0:
            return
        with self._lock:
            if generation is not None and generation != self.generation:
                return
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def evict(self, key: K) -> None:
        """Drop ``key`` from the cache."""
        with self._lock:
            self.generation += 1
            self._data.pop(key, None)

    def clear(self) -> None:
        """Drop everything."""
        with self._lock:
            self._data.clear()
