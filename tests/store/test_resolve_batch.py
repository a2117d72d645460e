"""tether.store.batch: many proxies resolved in one round trip per store."""

from __future__ import annotations

import pickle
import uuid
from typing import Any

import pytest

from tether.connectors.local import LocalConnector
from tether.exceptions import ProxyResolveMissingKeyError
from tether.proxy import Proxy, get_factory, is_resolved
from tether.store import Store
from tether.store.batch import get_batch, resolve_batch


def _counting(connector: Any) -> list[int]:
    """Count the raw requests a RedisConnector sends (each is one round trip)."""
    sent: list[int] = []
    round_trip = connector._raw.round_trip

    def counting(pool: Any, packer: Any, read: Any, **kwargs: Any) -> Any:
        sent.append(1)
        return round_trip(pool, packer, read, **kwargs)

    connector._raw.round_trip = counting
    return sent


def test_resolve_batch_is_one_round_trip_over_redis(redis_connector: Any) -> None:
    with Store(
        f'rb-{uuid.uuid4().hex[:8]}', redis_connector, cache_size=0, register=True
    ) as store:
        objs = [bytes([i]) * 100_000 for i in range(20)]
        proxies = store.proxy_batch(objs, populate_target=False)
        # As a consumer gets them: unpickled, unresolved.
        received = [pickle.loads(pickle.dumps(p)) for p in proxies]
        assert not any(is_resolved(p) for p in received)
        sent = _counting(redis_connector)
        resolve_batch(received)
        assert len(sent) == 1
        assert all(is_resolved(p) for p in received)
        assert [bytes(p) for p in received] == objs
        assert len(sent) == 1  # using them asks nothing more


def test_resolve_batch_mixes_stores_factories_and_non_proxies() -> None:
    with (
        Store(f'rb-a-{uuid.uuid4().hex[:8]}', LocalConnector()) as a,
        Store(f'rb-b-{uuid.uuid4().hex[:8]}', LocalConnector()) as b,
    ):
        pa = a.proxy([1, 2], populate_target=False)
        pb = b.proxy({'x': 1}, populate_target=False)
        plain: Proxy[str] = Proxy(lambda: 'made')
        done = a.proxy('done')
        resolve_batch([pa, pb, plain, done, 42, None])
        assert all(is_resolved(p) for p in (pa, pb, plain, done))
        assert pa == [1, 2]
        assert pb == {'x': 1}
        assert plain == 'made'
        assert done == 'done'


def test_resolve_batch_evicts_and_reports_missing() -> None:
    with Store(f'rb-e-{uuid.uuid4().hex[:8]}', LocalConnector(), cache_size=0) as store:
        evicting = store.proxy('once', evict=True, populate_target=False)
        gone = store.proxy('gone', populate_target=False)
        kept = store.proxy('kept', populate_target=False)
        store.evict(get_factory(gone).key)  # type: ignore[attr-defined]
        with pytest.raises(ProxyResolveMissingKeyError):
            resolve_batch([evicting, gone, kept])
        # The others of the batch resolved all the same.
        assert is_resolved(evicting)
        assert is_resolved(kept)
        assert not is_resolved(gone)
        assert evicting == 'once'
        assert kept == 'kept'
        assert not store.exists(get_factory(evicting).key)  # type: ignore[attr-defined]


def test_get_batch_uses_and_fills_the_cache(redis_connector: Any) -> None:
    with Store(f'rb-c-{uuid.uuid4().hex[:8]}', redis_connector, cache_size=16) as store:
        keys = store.put_batch([b'a' * 10, b'b' * 10])
        missing = store.put(b'c')
        store.evict(missing)
        sent = _counting(redis_connector)
        assert get_batch(store, [*keys, missing], default='none') == [
            b'a' * 10,
            b'b' * 10,
            'none',
        ]
        assert len(sent) == 1
        assert get_batch(store, keys) == [b'a' * 10, b'b' * 10]
        assert len(sent) == 1  # served by the cache


def test_store_get_batch_records_one_batch_in_the_metrics() -> None:
    with Store(f'getbatch-{uuid.uuid4().hex[:6]}', LocalConnector(), metrics=True) as store:
        keys = [store.put(i) for i in range(3)]
        gone = store.put('gone')
        store.evict(gone)
        assert store.get_batch([*keys, gone], default=-1) == [0, 1, 2, -1]
        assert store.metrics is not None
        totals = store.metrics.aggregate_times()
        assert totals['store.get_batch'].count == 1
        assert totals['store.get_batch'].nbytes > 0
        assert store.get_batch(keys) == [0, 1, 2]  # from the cache: no second batch
        assert store.metrics.aggregate_times()['store.get_batch'].count == 1
