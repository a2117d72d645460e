"""Performance metrics of a store (enabled with ``Store(..., metrics=True)``).

Metrics are local to the process. For each store operation (``store.put``,
``store.put_batch``, ``store.get``, ``store.get.cache_hit``, ``store.get.missing``,
``store.evict``, ``store.proxy``) the store records a count, total, minimum and maximum
time, and bytes moved, both per key (so per proxy) and in aggregate; the cache
(``store.cache``) counts hits and misses.

    store = Store('s', connector, metrics=True)
    p = store.proxy(data)
    store.metrics.get_metrics(p)        # the operations on p's key
    store.metrics.get_metrics(batch)    # a list of proxies (or keys): the batch operation
    store.metrics.aggregate_times()     # {'store.proxy': TimeStats(...), ...}

The method names and argument order are ProxyStore's (``add_time(name, key, time_ms)``,
``add_counter``, ``add_attribute(name, key, value)``, ``as_dict``); batch operations are
recorded under the tuple of their keys.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import OrderedDict
from typing import Any

from tether.proxy import Proxy
from tether.store.utils import get_key

__all__ = ['Metrics', 'StoreMetrics', 'TimeStats']

_MAX_KEYS = 10_000


@dataclasses.dataclass(init=False)
class TimeStats:
    """Timing of one operation: count, total/min/max seconds, and bytes moved.

    Also built from ProxyStore's millisecond fields (``TimeStats(count=1,
    avg_time_ms=2.0, ...)``, or ``TimeStats(**stats.as_dict())``): a millisecond value
    fills its seconds field when that field is not given. Two stats add with ``+``.
    """

    count: int
    total_s: float
    min_s: float
    max_s: float
    nbytes: int
    last_s: float
    last_timestamp: float

    def __init__(
        self,
        count: int = 0,
        *,
        total_s: float | None = None,
        min_s: float | None = None,
        max_s: float | None = None,
        nbytes: int = 0,
        last_s: float | None = None,
        last_timestamp: float = 0.0,
        avg_time_ms: float | None = None,
        min_time_ms: float | None = None,
        max_time_ms: float | None = None,
        last_time_ms: float | None = None,
    ) -> None:
        def seconds(given: float | None, ms: float | None, default: float) -> float:
            if given is not None:
                return given
            return default if ms is None else ms / 1e3

        self.count = count
        avg_total = None if avg_time_ms is None else avg_time_ms * count
        self.total_s = seconds(total_s, avg_total, 0.0)
        self.min_s = seconds(min_s, min_time_ms, float('inf'))
        self.max_s = seconds(max_s, max_time_ms, 0.0)
        self.nbytes = nbytes
        self.last_s = seconds(last_s, last_time_ms, 0.0)
        self.last_timestamp = last_timestamp

    def __add__(self, other: TimeStats) -> TimeStats:
        """The stats of both (the latest call is the later of the two)."""
        if not isinstance(other, TimeStats):
            return NotImplemented
        latest = self if self.last_timestamp >= other.last_timestamp else other
        return TimeStats(
            count=self.count + other.count,
            total_s=self.total_s + other.total_s,
            min_s=min(self.min_s, other.min_s),
            max_s=max(self.max_s, other.max_s),
            nbytes=self.nbytes + other.nbytes,
            last_s=latest.last_s,
            last_timestamp=latest.last_timestamp,
        )

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
        self.last_s = seconds
        self.last_timestamp = time.time()

    def add_time(self, time_ms: float) -> None:
        """Record one call that took ``time_ms`` milliseconds."""
        self.add(time_ms / 1e3)

    @property
    def avg_time_ms(self) -> float:
        """Mean milliseconds per call."""
        return self.avg_s * 1e3

    @property
    def min_time_ms(self) -> float:
        """Fastest call, in milliseconds."""
        return self.min_s * 1e3

    @property
    def max_time_ms(self) -> float:
        """Slowest call, in milliseconds."""
        return self.max_s * 1e3

    @property
    def last_time_ms(self) -> float:
        """Latest call, in milliseconds."""
        return self.last_s * 1e3

    def as_dict(self) -> dict[str, Any]:
        """Return the statistics as a dict (with the millisecond views too)."""
        out = dataclasses.asdict(self)
        out.update(
            avg_time_ms=self.avg_time_ms,
            min_time_ms=self.min_time_ms,
            max_time_ms=self.max_time_ms,
            last_time_ms=self.last_time_ms,
        )
        return out


@dataclasses.dataclass
class Metrics:
    """Metrics of one key: per-operation timings, attributes and counters."""

    times: dict[str, TimeStats] = dataclasses.field(default_factory=dict)
    attributes: dict[str, Any] = dataclasses.field(default_factory=dict)
    counters: dict[str, int] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Return the metrics as plain dicts."""
        return {
            'times': {k: v.as_dict() for k, v in self.times.items()},
            'attributes': dict(self.attributes),
            'counters': dict(self.counters),
        }


class StoreMetrics:
    """Collects metrics for one store; keeps per-key records for the newest 10,000 keys."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: OrderedDict[Any, Metrics] = OrderedDict()
        self._aggregate: dict[str, TimeStats] = {}

    def add_time(self, name: str, key: Any, time_ms: float, nbytes: int = 0) -> None:
        """Record that ``name`` on ``key`` (``None`` for no key) took ``time_ms`` milliseconds.

        ``key`` may be a proxy, or a list of proxies or keys (recorded under the tuple of
        their keys).
        """
        self._add(name, _key_of(key), time_ms / 1e3, nbytes)

    def _add(self, op: str, key: Any, seconds: float, nbytes: int = 0) -> None:
        with self._lock:
            self._aggregate.setdefault(op, TimeStats()).add(seconds, nbytes)
            if key is not None:
                m = self._key(key)
                m.times.setdefault(op, TimeStats()).add(seconds, nbytes)

    def add_attribute(self, name: str, key: Any, value: Any) -> None:
        """Record an attribute (such as ``store.put.object_size``) of ``key``."""
        with self._lock:
            self._key(_key_of(key)).attributes[name] = value

    def add_counter(self, name: str, key: Any, value: int) -> None:
        """Add ``value`` to the counter ``name`` of ``key``."""
        with self._lock:
            counters = self._key(_key_of(key)).counters
            counters[name] = counters.get(name, 0) + value

    def _key(self, key: Any) -> Metrics:
        m = self._keys.get(key)
        if m is None:
            m = self._keys[key] = Metrics()
            while len(self._keys) > _MAX_KEYS:
                self._keys.popitem(last=False)
        return m

    def get_metrics(self, key_or_proxy: Any) -> Metrics | None:
        """Return the metrics of a key, of the key behind a store proxy, or of a batch.

        A list of proxies or keys (what ``proxy_batch``/``put_batch`` took or returned)
        gives the metrics of that batch operation.
        """
        key = _key_of(key_or_proxy)
        with self._lock:
            m = self._keys.get(key)
            if m is None:
                return None
            return dataclasses.replace(
                m,
                times={k: dataclasses.replace(v) for k, v in m.times.items()},
                attributes=dict(m.attributes),
                counters=dict(m.counters),
            )

    def aggregate_times(self) -> dict[str, TimeStats]:
        """Return the timings of each operation over all keys."""
        with self._lock:
            return {k: dataclasses.replace(v) for k, v in self._aggregate.items()}

    def reset(self) -> None:
        """Forget everything recorded."""
        with self._lock:
            self._keys.clear()
            self._aggregate.clear()


def _key_of(key_or_proxy: Any) -> Any:
    """The metrics key of a key, a store proxy, or a list of either (a tuple of keys)."""
    # A proxy first, by type() (never resolves): a proxy of a list or tuple is not a key.
    if issubclass(type(key_or_proxy), Proxy):
        return get_key(key_or_proxy)
    if isinstance(key_or_proxy, list):
        return tuple(_key_of(k) for k in key_or_proxy)
    return key_or_proxy
