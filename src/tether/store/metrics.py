"""Performance metrics of a store (enabled with ``Store(..., metrics=True)``).

Metrics are local to the process. For each store operation (``store.put``,
``store.put_batch``, ``store.get``, ``store.get.cache_hit``, ``store.get.missing``,
``store.evict``, ``store.proxy``) the store records a count, total, minimum and maximum
time, and bytes moved, both per key (so per proxy) and in aggregate; the cache
(``store.cache``) counts hits and misses.

    store = Store('s', connector, metrics=True)
    p = store.proxy(data)
    store.metrics.get_metrics(p)        # the operations on p's key
    store.metrics.aggregate_times()     # {'store.proxy': TimeStats(...), ...}
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from typing import Any

__all__ = ['Metrics', 'StoreMetrics', 'TimeStats']

_MAX_KEYS = 10_000


@dataclasses.dataclass
class TimeStats:
    """Timing of one operation: count, total/min/max seconds, and bytes moved."""

    count: int = 0
    total_s: float = 0.0
    min_s: float = float('inf')
    max_s: float = 0.0
    nbytes: int = 0

    @property
    def avg_s(self) -> float:
        """Mean seconds per call."""
        return self.total_s / self.count if self.count else 0.0

    def add(self, seconds: float, nbytes: int = 0) -> None:
        """Record one call."""
        self.count += 1
        self.total_s += seconds
        self.min_s = min(self.min_s, seconds)
        self.max_s = max(self.max_s, seconds)
        self.nbytes += nbytes


@dataclasses.dataclass
class Metrics:
    """Metrics of one key: per-operation timings and attributes (such as sizes)."""

    times: dict[str, TimeStats] = dataclasses.field(default_factory=dict)
    attributes: dict[str, Any] = dataclasses.field(default_factory=dict)


class StoreMetrics:
    """Collects metrics for one store; keeps per-key records for the newest 10,000 keys."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: OrderedDict[Any, Metrics] = OrderedDict()
        self._aggregate: dict[str, TimeStats] = {}

    def add_time(self, op: str, key: Any, seconds: float, nbytes: int = 0) -> None:
        """Record that ``op`` on ``key`` (``None`` for no key) took ``seconds``."""
        with self._lock:
            self._aggregate.setdefault(op, TimeStats()).add(seconds, nbytes)
            if key is not None:
                m = self._key(key)
                m.times.setdefault(op, TimeStats()).add(seconds, nbytes)

    def add_attribute(self, key: Any, name: str, value: Any) -> None:
        """Record an attribute (such as ``store.put.object_size``) of ``key``."""
        with self._lock:
            self._key(key).attributes[name] = value

    def _key(self, key: Any) -> Metrics:
        m = self._keys.get(key)
        if m is None:
            m = self._keys[key] = Metrics()
            while len(self._keys) > _MAX_KEYS:
                self._keys.popitem(last=False)
        return m

    def get_metrics(self, key_or_proxy: Any) -> Metrics | None:
        """Return the metrics of a key (or of the key behind a store proxy of any target).

        Does not resolve a proxy.
        """
        from tether.proxy import Proxy
        from tether.store.utils import get_key

        key = key_or_proxy
        # Proxy first, by type(): a proxy of a tuple is not a key (and must not resolve).
        if issubclass(type(key_or_proxy), Proxy):
            key = get_key(key_or_proxy)
        with self._lock:
            m = self._keys.get(key)
            return None if m is None else dataclasses.replace(m, times=dict(m.times))

    def aggregate_times(self) -> dict[str, TimeStats]:
        """Return the timings of each operation over all keys."""
        with self._lock:
            return {k: dataclasses.replace(v) for k, v in self._aggregate.items()}

    def reset(self) -> None:
        """Forget everything recorded."""
        with self._lock:
            self._keys.clear()
            self._aggregate.clear()
