"""A node server's Prometheus metrics, scraped while clients put and get objects."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.metrics._scrape import scrape, status_of, value
from tests.node.conftest import RunningNode
from tether._serve.spawn import verify_server


def _metrics_address(node: RunningNode) -> tuple[str, int] | None:
    info = verify_server(node.state, node.secret)
    assert info is not None
    return info.metrics


def test_node_metrics_move_with_traffic(tmp_path: Path) -> None:
    node = RunningNode(tmp_path, '--metrics-port', '0')
    try:
        address = _metrics_address(node)
        assert address[0] == '127.0.0.1'
        before = scrape(address)
        assert value(before, 'tether_server_info', kind='node', name=node.name) == 1.0
        c = node.connector()
        try:
            keys = [c.put(os.urandom(1000)) for _ in range(3)]
            for k in keys:
                assert len(c.get(k) or b'') == 1000
            assert c.get(keys[0]) is not None
        finally:
            c.close()
        after = scrape(address)
        assert value(after, 'tether_requests_total', op='put') >= 3
        assert value(after, 'tether_requests_total', op='get') >= 4
        assert value(after, 'tether_request_bytes_total', op='put', direction='in') >= 3000
        assert value(after, 'tether_request_bytes_total', op='get', direction='out') >= 4000
        assert value(after, 'tether_request_seconds_count', op='put') >= 3
        assert value(after, 'tether_objects') >= 3
        assert value(after, 'tether_objects_bytes', place='memory') >= 3000
    finally:
        node.stop()


def test_node_metrics_off_by_default(tmp_path: Path) -> None:
    node = RunningNode(tmp_path)
    try:
        assert _metrics_address(node) is None
    finally:
        node.stop()


def test_node_metrics_token_checked_on_every_scrape(tmp_path: Path) -> None:
    token_file = tmp_path / 'token'
    token_file.write_text('s3cret-token\n')
    node = RunningNode(tmp_path, '--metrics-port', '0', '--metrics-token-file', str(token_file))
    try:
        address = _metrics_address(node)
        assert status_of(address) == 401
        assert status_of(address, 'wrong') == 401
        assert status_of(address, 's3cret-token') == 200
        assert status_of(address, 'wrong') == 401
    finally:
        node.stop()


def test_non_loopback_bind_without_token_is_refused() -> None:
    from tether._serve.metrics import MetricsEndpoint, MetricsOptions, ServerMetrics
    from tether.exceptions import ConfigError

    m = ServerMetrics('node', 'x', ['put'])
    with pytest.raises(ValueError, match='bearer token'):
        MetricsOptions(port=0, bind='0.0.0.0')
    unchecked = MetricsOptions.model_construct(port=0, bind='0.0.0.0', token_file=None)
    with pytest.raises(ConfigError, match='bearer token'):
        MetricsEndpoint(m.registry, unchecked)


def test_unknown_operation_is_counted_as_other() -> None:
    from prometheus_client import generate_latest

    from tether._serve.metrics import ServerMetrics

    m = ServerMetrics('node', 'x', ['put'])
    m.observe('put', 0.001, 10)
    m.observe('some-user-key-123', 0.001)
    text = generate_latest(m.registry).decode()
    assert value(text, 'tether_requests_total', op='other') == 1.0
    assert 'some-user-key-123' not in text
