"""Export a store's metrics (``Store(..., metrics=True)``) to Prometheus.

:class:`StoreCollector` reads :meth:`StoreMetrics.aggregate_times
<tether.store.metrics.StoreMetrics.aggregate_times>` when scraped: per operation
(``store.put``, ``store.get``, ``store.proxy`` ...), how many calls, their total
seconds and the bytes they moved. Per-key records are never exported (one label value
per key would be unbounded). Register it with a registry of your own (needs the
``metrics`` extra, ``pip install "tether[metrics]"``)::

    from prometheus_client import CollectorRegistry, start_http_server
    from tether.store.prometheus import StoreCollector

    registry = CollectorRegistry()
    registry.register(StoreCollector(store))
    start_http_server(9100, addr='127.0.0.1', registry=registry)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tether.exceptions import ConfigError
from tether.store._store import Store

__all__ = ['StoreCollector']


class StoreCollector:
    """A Prometheus collector of one or more stores' aggregate metrics.

    Samples: ``tether_store_operations_total``, ``tether_store_operation_seconds_total``
    and ``tether_store_operation_bytes_total``, labelled by ``store`` (its name) and
    ``op``.

    Args:
        stores: Stores made with ``metrics=True``.

    Raises:
        ConfigError: if a store records no metrics.
    """

    def __init__(self, *stores: Store[Any]) -> None:
        for store in stores:
            if store.metrics is None:
                raise ConfigError(
                    f'store {store.name!r} records no metrics: make it with metrics=True',
                )
        self.stores = stores

    def describe(self) -> list[Any]:
        """Nothing up front (the operations are known once recorded)."""
        return []

    def collect(self) -> Iterator[Any]:
        """The stores' aggregate timings, read now."""
        from prometheus_client.core import CounterMetricFamily

        labels = ['store', 'op']
        calls = CounterMetricFamily(
            'tether_store_operations', 'Store operations, by store and operation', labels=labels
        )
        seconds = CounterMetricFamily(
            'tether_store_operation_seconds',
            'Seconds spent in store operations, by store and operation',
            labels=labels,
        )
        nbytes = CounterMetricFamily(
            'tether_store_operation_bytes',
            'Bytes moved by store operations, by store and operation',
            labels=labels,
        )
        for store in self.stores:
            assert store.metrics is not None
            for op, stats in sorted(store.metrics.aggregate_times().items()):
                calls.add_metric([store.name, op], stats.count)
                seconds.add_metric([store.name, op], stats.total_s)
                nbytes.add_metric([store.name, op], stats.nbytes)
        yield calls
        yield seconds
        yield nbytes
