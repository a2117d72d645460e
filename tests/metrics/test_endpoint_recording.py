"""How an endpoint records its clients' requests: nothing installed when metrics are off;
with them on, a tally of plain numbers turned into the usual families when scraped."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from tests.metrics._scrape import value
from tether._serve import codes as proto
from tether._serve.metrics import ServerMetrics, Tally
from tether._wire import Frame
from tether.endpoint import Endpoint, SiteConfig


def _endpoint(home: Path, name: str, **settings: Any) -> Iterator[Endpoint]:
    config = SiteConfig.create(name, home, **settings)
    ep = Endpoint(config, home)
    try:
        yield ep
    finally:
        asyncio.run(ep.close())


@pytest.fixture
def off(tmp_path: Path) -> Iterator[Endpoint]:
    yield from _endpoint(tmp_path, 'rec-off')


@pytest.fixture
def on(tmp_path: Path) -> Iterator[Endpoint]:
    yield from _endpoint(tmp_path, 'rec-on', metrics={'port': 0})


def test_metrics_off_installs_no_wrapper(off: Endpoint) -> None:
    assert off.metrics.metrics is None
    # The client server calls the endpoint's own handler: no wrapper, no recording.
    assert off.clients.handler == off._handle_client
    assert off.metrics.observed_sync(off._handle_client) == off._handle_client


def test_metrics_on_record_what_the_handler_answered(on: Endpoint) -> None:
    handler: Any = on.clients.handler
    assert handler != on._handle_client  # recorded
    oid = 'a' * 32
    data = bytearray(b'x' * 1000)
    put = handler(None, Frame(proto.PUT, {'ids': [oid]}, [data], request_id=1))
    got = handler(None, Frame(proto.GET, {'ids': [oid]}, [], request_id=2))
    gone = handler(None, Frame(proto.EVICT, {'ids': [oid]}, [], request_id=3))
    bad = handler(None, Frame(proto.GET, {'ids': ['no/such id']}, [], request_id=4))
    assert isinstance(put, bytearray)
    assert isinstance(got, bytearray)
    assert bytes(got).endswith(bytes(data))
    assert isinstance(gone, tuple)
    assert gone[0] == proto.OK
    assert isinstance(bad, tuple)
    assert bad[0] != proto.OK
    assert on.metrics.metrics is not None
    text = generate_latest(on.metrics.metrics.registry).decode()
    assert value(text, 'tether_requests_total', op='put') == 1
    assert value(text, 'tether_requests_total', op='get') == 2
    assert value(text, 'tether_requests_total', op='evict') == 1
    assert value(text, 'tether_request_errors_total', op='get') == 1
    assert value(text, 'tether_request_errors_total', op='put') == 0
    assert value(text, 'tether_request_bytes_total', op='put', direction='in') == 1000
    assert value(text, 'tether_request_bytes_total', op='get', direction='out') >= 1000
    assert value(text, 'tether_request_seconds_count', op='get') == 2
    assert value(text, 'tether_request_seconds_bucket', op='evict', le='+Inf') == 1
    assert value(text, 'tether_request_seconds_sum', op='put') > 0


def test_tally_and_observe_add_up_per_operation() -> None:
    m = ServerMetrics('node', 'x', ['put', 'get'])
    tally = m.tally({proto.PUT: 'put', proto.GET: 'get', proto.EVICT: 'not-a-known-op'})
    assert isinstance(tally, Tally)
    assert set(tally.rows) == {'get', 'other', 'put'}
    assert tally.by_type[proto.EVICT] is tally.other
    row = tally.by_type[proto.PUT]
    row.quick += 2  # two requests under the first bound
    row.seconds += 0.00005
    row.buckets[tally.bucket(0.002)] += 1  # one of 2 ms
    row.bytes_in += 30
    row.untimed += 1  # passed on: counted, not timed
    tally.other.errors += 1
    tally.other.untimed += 1
    m.observe('put', 0.02, 5, 7, error=True)
    stats = m.snapshot()
    assert set(stats) == {'other', 'put'}  # an operation with no request is not listed
    put = stats['put']
    assert put.count == 5
    assert put.errors == 1
    assert (put.bytes_in, put.bytes_out) == (35, 7)
    assert sum(put.buckets) == 4  # the untimed request is in no bucket
    assert put.buckets[0] == 2
    assert put.buckets[tally.bucket(0.002)] == 1
    assert put.buckets[tally.bucket(0.02)] == 1
    assert put.seconds == pytest.approx(0.02005)
    assert (stats['other'].count, stats['other'].errors) == (1, 1)
    assert tally.bucket(Tally.FIRST) == 0
    assert tally.bucket(Tally.FIRST * 1.01) == 1
