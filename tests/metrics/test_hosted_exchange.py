"""The hosted agent exchange's Prometheus metrics, scraped while users send messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faas.conftest import wait_for
from tests.metrics._scrape import scrape, status_of, value
from tether._serve.metrics import MetricsOptions
from tether.agents.exchange import HttpExchange, MailboxStatus
from tether.agents.exchange.hosted import HostedExchangeServer, UserRecord, hash_token
from tether.exceptions import UnknownMailboxError
from tether.testing._agent_behaviors import Echo


def test_hosted_exchange_metrics_move_with_messages(tmp_path: Path) -> None:
    token = tmp_path / 'm.token'
    token.write_text('exchange-metrics')
    users = {n: UserRecord(n, hash_token(f'token-{n}')) for n in ('alice', 'bob')}
    options = MetricsOptions(port=0, token_file=str(token))
    with HostedExchangeServer(users, metrics=options) as server:
        address = server.metrics_address
        assert address is not None
        assert status_of(address) == 401
        alice = HttpExchange(server.url, token='token-alice')
        bob = HttpExchange(server.url, token='token-bob')
        try:
            agent_id = alice.register_agent(Echo)
            assert alice.status(agent_id) is MailboxStatus.ACTIVE
            alice.transport().send_raw(agent_id, b'x' * 100)  # nobody listens: it waits
            with pytest.raises(UnknownMailboxError):
                bob.transport().send_raw(agent_id, b'hostile')
            text = scrape(address, 'exchange-metrics')
        finally:
            alice.close()
            bob.close()
    assert value(text, 'tether_server_info', kind='hosted-exchange', name='exchange') == 1.0
    assert value(text, 'tether_requests_total', op='register') >= 1
    assert value(text, 'tether_requests_total', op='status') >= 1
    assert value(text, 'tether_request_errors_total', op='send') >= 1
    assert value(text, 'tether_request_bytes_total', op='send', direction='in') >= 100
    assert value(text, 'tether_exchange_mailboxes', status='active') >= 1
    assert value(text, 'tether_exchange_queued_messages') >= 1
    assert value(text, 'tether_exchange_connections') >= 1
    assert 'alice' not in text
    assert agent_id not in text


def test_hosted_exchange_metrics_off_by_default() -> None:
    users = {'alice': UserRecord('alice', hash_token('token-alice'))}
    with HostedExchangeServer(users) as server:
        assert server.metrics_address is None
        assert server.state.metrics is None


def test_cli_serve_with_metrics(tmp_path: Path) -> None:
    import sys
    import urllib.error

    from tether.agents.exchange.hosted import add_user
    from tether.testing import ServerProcess, free_port

    users = tmp_path / 'users.toml'
    user_token = add_user(users, 'alice')
    metrics_token = tmp_path / 'm.token'
    metrics_token.write_text('cli-metrics')
    port, mport = free_port(), free_port()
    args = [sys.executable, '-c', 'from tether.cli import main; main()']
    args += ['agents', 'exchange', 'serve', '--users', str(users), '--port', str(port)]
    args += ['--metrics-port', str(mport), '--metrics-token-file', str(metrics_token)]
    with ServerProcess(args, port):
        exchange = HttpExchange(f'ws://127.0.0.1:{port}', token=user_token)
        try:
            exchange.register_agent(Echo)
        finally:
            exchange.close()

        def scraped() -> str | None:
            try:
                return scrape(('127.0.0.1', mport), 'cli-metrics')
            except (urllib.error.URLError, ConnectionError):
                return None

        # The metrics port opens just after the exchange's.
        text = wait_for(scraped, 30, 'the metrics endpoint to open')
        assert status_of(('127.0.0.1', mport), 'wrong') == 401
    assert value(text, 'tether_requests_total', op='register') == 1
