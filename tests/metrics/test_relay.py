"""The relay's Prometheus metrics, scraped while endpoints register and list."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.metrics._scrape import scrape, status_of, value
from tests.relay.conftest import ThreadRelay, make_relay  # noqa: F401
from tether._serve import signalling as rp
from tether.relay import RelayConfig

UUID = '0a5e3a44-6a39-4bd2-9d7e-2f0c1b6f8a01'


def test_relay_metrics_move_with_traffic(
    make_relay: Callable[..., ThreadRelay],  # noqa: F811
    tmp_path: Path,
) -> None:
    token = tmp_path / 'metrics.token'
    token.write_text('relay-metrics')
    relay = make_relay(metrics={'port': 0, 'token_file': str(token)})
    address = relay.status()['metrics']
    assert status_of(address) == 401
    assert status_of(address, 'nope') == 401
    conn = relay.register('alice', UUID, 'ep-1')
    try:
        conn.request(rp.LIST, {})
        text = scrape(address, 'relay-metrics')
    finally:
        conn.close()
    assert value(text, 'tether_server_info', kind='relay', name='relay') == 1.0
    assert value(text, 'tether_requests_total', op='register') == 1
    assert value(text, 'tether_requests_total', op='list') == 1
    assert value(text, 'tether_request_bytes_total', op='list', direction='in') == 0
    assert value(text, 'tether_relay_endpoints') == 1
    assert value(text, 'tether_relay_users') == 1
    assert value(text, 'tether_relay_tunnels', state='waiting') == 0
    assert value(text, 'tether_relay_tunnels', state='open_sides') == 0
    assert value(text, 'tether_relay_forwarded_bytes_total') == 0
    counts = relay.relay.counts()
    assert (counts.endpoints, counts.users, counts.forwarded_bytes) == (1, 1, 0)
    assert 'alice' not in text  # no per-user labels
    assert UUID not in text


def test_relay_metrics_off_by_default(make_relay: Callable[..., ThreadRelay]) -> None:  # noqa: F811
    relay = make_relay()
    assert relay.status()['metrics'] is None
    assert relay.relay.metrics.metrics is None


def test_relay_toml_token_file_is_relative_to_it(tmp_path: Path) -> None:
    path = tmp_path / 'relay.toml'
    path.write_text(
        'insecure = true\n[metrics]\nport = 9100\nbind = "0.0.0.0"\ntoken_file = "m.token"\n'
    )
    config = RelayConfig.read_toml(path)
    assert config.metrics.token_file == str(tmp_path / 'm.token')
