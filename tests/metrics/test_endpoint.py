"""An endpoint's Prometheus metrics, scraped while clients put and get through two sites."""

from __future__ import annotations

import os

from click.testing import CliRunner

from tests.endpoint.conftest import Relay, Site, loop_relay, site  # noqa: F401
from tests.metrics._scrape import scrape, status_of, value
from tether.cli import cli


def test_endpoint_metrics_move_with_traffic(site: Site, loop_relay: Relay) -> None:  # noqa: F811
    token = site.home / 'metrics.token'
    token.write_text('ep-token')
    site.configure('m-a', loop_relay.address, metrics={'port': 0, 'token_file': str(token)})
    site.configure('m-b', loop_relay.address)
    site.start('m-a')
    site.start('m-b')
    address = site.status('m-a')['metrics']
    assert site.status('m-b')['metrics'] is None  # off by default
    assert status_of(address) == 401
    assert status_of(address, 'wrong') == 401
    before = scrape(address, 'ep-token')
    assert value(before, 'tether_server_info', kind='endpoint', name='m-a') == 1.0
    conn_a = site.connector('m-a')
    conn_b = site.connector('m-b')
    try:
        key = conn_a.put(os.urandom(5000))
        assert len(bytes(conn_a.get(key) or b'')) == 5000
        assert len(bytes(conn_b.get(key) or b'')) == 5000  # from B: a peer request to A
    finally:
        conn_a.close()
        conn_b.close()
    after = scrape(address, 'ep-token')
    assert value(after, 'tether_requests_total', op='put') >= 1
    assert value(after, 'tether_request_bytes_total', op='put', direction='in') >= 5000
    assert value(after, 'tether_request_seconds_count', op='get') >= 1
    assert value(after, 'tether_objects') >= 1
    assert value(after, 'tether_objects_bytes', place='memory') >= 5000
    assert value(after, 'tether_clients') >= 0
    assert after.count('tether_peers{') == 0  # A opened no link: B's endpoint came to A


def test_endpoint_cli_refuses_open_metrics_without_token(site: Site) -> None:  # noqa: F811
    out = CliRunner().invoke(
        cli,
        ['endpoint', 'configure', 'm-open', '--metrics-port', '9', '--metrics-bind', '0.0.0.0'],
        env={'TETHER_HOME': str(site.home)},
    )
    assert out.exit_code != 0
    assert 'bearer token' in out.output


def test_endpoint_cli_writes_the_metrics_table(site: Site) -> None:  # noqa: F811
    from tether._serve.site import SiteConfig

    token = site.home / 'm.token'
    token.write_text('t')
    out = CliRunner().invoke(
        cli,
        [
            'endpoint',
            'configure',
            'm-cli',
            '--metrics-port',
            '9102',
            '--metrics-bind',
            '0.0.0.0',
            '--metrics-token-file',
            str(token),
        ],
        env={'TETHER_HOME': str(site.home)},
    )
    assert out.exit_code == 0, out.output
    config = SiteConfig.read(site.home / 'endpoints' / 'm-cli')
    assert config.metrics.port == 9102
    assert config.metrics.bind == '0.0.0.0'
    assert config.metrics.token_file == str(token.resolve())
