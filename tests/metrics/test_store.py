"""A store's metrics exported through StoreCollector."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from tests.metrics._scrape import value
from tether.connectors.local import LocalConnector
from tether.exceptions import ConfigError
from tether.store import Store
from tether.store.prometheus import StoreCollector


def test_store_collector_exports_aggregates() -> None:
    store = Store('metrics-export', LocalConnector(), metrics=True, register=False)
    try:
        registry = CollectorRegistry()
        registry.register(StoreCollector(store))
        key = store.put(b'x' * 1000)
        assert store.get(key) == b'x' * 1000
        text = generate_latest(registry).decode()
    finally:
        store.close()
    assert (
        value(text, 'tether_store_operations_total', store='metrics-export', op='store.put') == 1
    )
    assert (
        value(text, 'tether_store_operations_total', store='metrics-export', op='store.get') == 1
    )
    put_bytes = value(
        text, 'tether_store_operation_bytes_total', store='metrics-export', op='store.put'
    )
    assert put_bytes > 0
    assert str(key.object_id) not in text if hasattr(key, 'object_id') else True


def test_store_without_metrics_is_refused() -> None:
    store = Store('metrics-none', LocalConnector(), register=False)
    try:
        with pytest.raises(ConfigError, match='metrics=True'):
            StoreCollector(store)
    finally:
        store.close()
