"""Hybrid exchange specifics: addresses, direct sends, fallback, authentication."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.agents._behaviors import Echo
from tether._wire import SyncClient
from tether.agents import Manager
from tether.agents.launcher import ThreadLauncher
from tether.agents.message import ACK, AGENT_MESSAGE, Ping, encode
from tether.exceptions import AuthenticationError
from tether.testing import wait_until


def test_an_address_is_published_only_once_it_serves(
    make_exchange: Any, redis_client: Any
) -> None:
    exchange = make_exchange('hybrid')
    agent_id = exchange.register_agent(Echo)
    key = f'{exchange.prefix}addr:{agent_id}'
    seen: list[bytes] = []

    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            raw = redis_client.get(key)
            if raw is not None:
                seen.append(raw)
                return

    watcher = threading.Thread(target=watch)
    watcher.start()
    with Manager(exchange, ThreadLauncher()) as manager:
        manager.launch(Echo(), agent_id=agent_id)
        watcher.join(60)
        assert seen, 'the address was never published'
        # The very first moment the address is visible, a direct message is accepted.
        host, _, port = seen[0].decode().rpartition(':')
        transport = exchange.transport()
        header, payloads = encode(Ping('client-test', agent_id, 1), transport.codec)
        client = SyncClient(host, int(port), secret=transport.secret)
        try:
            reply = client.request(AGENT_MESSAGE, header, payloads, retry=False)
            assert reply.type == AGENT_MESSAGE + 1  # ACK, not 'not-here'
        finally:
            client.close()
    # Stopped: the address is gone before the mailbox stops being served.
    assert redis_client.get(key) is None


def _wait_served(transport: Any, agent_id: str) -> None:
    """Wait until a thread agent of this process serves its mailbox directly."""
    wait_until(
        lambda: agent_id in transport._served, timeout=60, message='the agent to serve directly'
    )
    transport._addresses.pop(agent_id, None)  # forget a lookup made before it served


def test_direct_sends_fall_back_to_redis(make_exchange: Any) -> None:
    exchange = make_exchange('hybrid')
    with Manager(exchange, ThreadLauncher()) as manager:
        handle = manager.launch(Echo())
        handle.ping(timeout=30)
        transport = exchange.transport()
        _wait_served(transport, handle.agent_id)
        # A stale address (nobody listens there): the message goes through Redis.
        transport._addresses[handle.agent_id] = ('127.0.0.1', 1)
        served = transport._served.pop(handle.agent_id)
        try:
            before = transport.fallback_sends
            future = handle.echo('via redis')
            assert transport.fallback_sends == before + 1
        finally:
            transport._served[handle.agent_id] = served
        assert future.result(30) == 'via redis'


def test_a_wrong_secret_is_refused(make_exchange: Any) -> None:
    exchange = make_exchange('hybrid', secret='right')
    with Manager(exchange, ThreadLauncher()) as manager:
        handle = manager.launch(Echo())
        handle.ping(timeout=30)
        transport = exchange.transport()
        host, port = transport._server.address
        client = SyncClient(host, port, secret='wrong')
        with pytest.raises(AuthenticationError):
            client.request(AGENT_MESSAGE, {}, [])
        client.close()


def _site_certificate(folder: Any, name: str = 'site') -> tuple[str, str]:
    from tether._serve.tls import make_self_signed, write_private

    cert, key = make_self_signed(f'{name}.test', ['127.0.0.1'])
    (folder / f'{name}.pem').write_text(cert)
    write_private(folder / f'{name}.key', key)
    return str(folder / f'{name}.pem'), str(folder / f'{name}.key')


def test_direct_links_run_inside_tls_across_processes(make_exchange: Any, tmp_path: Any) -> None:
    import ssl

    from tether.agents.launcher import ProcessLauncher
    from tether.exceptions import WireConnectionError

    cert, key = _site_certificate(tmp_path)
    exchange = make_exchange(
        'hybrid', secret_env='TETHER_TEST_NO_SUCH_VAR', tls_cert=cert, tls_key=key
    )
    assert exchange.tls
    with Manager(exchange, ProcessLauncher()) as manager:
        handle = manager.launch(Echo())
        handle.ping(timeout=60)
        transport = exchange.transport()
        deadline = time.monotonic() + 60
        while transport._address(handle.agent_id) is None and time.monotonic() < deadline:
            transport._addresses.pop(handle.agent_id, None)  # not yet published
            time.sleep(0.02)
        before = transport.direct_sends
        assert handle.echo('over tls').result(60) == 'over tls'
        assert transport.direct_sends > before  # it went direct, not through Redis
        raw = transport.redis.execute('GET', f'{exchange.prefix}addr:{handle.agent_id}')
        host, _, port = raw.decode().rpartition(':')
        header, payloads = encode(Ping('client-test', handle.agent_id, 1), transport.codec)
        # Without TLS the agent's server does not even start the handshake.
        with pytest.raises(WireConnectionError):
            SyncClient(host, int(port), secret=transport.secret, timeout=10).request(
                AGENT_MESSAGE, header, payloads, retry=False
            )
        # A server whose certificate is not the site's is refused by the sender.
        other_cert, _ = _site_certificate(tmp_path, 'other')
        untrusted = ssl.create_default_context(cafile=other_cert)
        with pytest.raises(WireConnectionError, match='CERTIFICATE_VERIFY_FAILED'):
            SyncClient(
                host, int(port), secret=transport.secret, ssl=untrusted, timeout=10
            ).request(AGENT_MESSAGE, header, payloads, retry=False)
        # The right certificate but a wrong secret: refused by the challenge-response.
        trusted = ssl.create_default_context(cafile=cert)
        with pytest.raises(AuthenticationError):
            SyncClient(host, int(port), secret='wrong', ssl=trusted, timeout=10).request(
                AGENT_MESSAGE, header, payloads, retry=False
            )
        client = SyncClient(host, int(port), secret=transport.secret, ssl=trusted, timeout=10)
        try:
            assert client.request(AGENT_MESSAGE, header, payloads, retry=False).type == ACK
        finally:
            client.close()


def test_a_sender_with_the_wrong_secret_is_refused_and_falls_back(
    make_exchange: Any, caplog: pytest.LogCaptureFixture
) -> None:
    exchange = make_exchange('hybrid', secret='right')
    with Manager(exchange, ThreadLauncher()) as manager:
        handle = manager.launch(Echo())
        handle.ping(timeout=30)
        transport = exchange.transport()
        _wait_served(transport, handle.agent_id)
        # This process's sender now presents another secret than the agent's server.
        served = transport._served.pop(handle.agent_id)
        transport.secret = b'wrong'
        try:
            before = transport.fallback_sends
            with caplog.at_level('WARNING', logger='tether.agents.exchange.hybrid'):
                future = handle.echo('refused directly')
            assert transport.fallback_sends == before + 1
        finally:
            transport._served[handle.agent_id] = served
        assert future.result(30) == 'refused directly'  # delivered through Redis instead


def test_tls_arguments_are_checked(make_exchange: Any, tmp_path: Any) -> None:
    from tether.exceptions import AgentError

    with pytest.raises(ValueError, match='go together'):
        make_exchange('hybrid', tls_cert='x.pem')
    exchange = make_exchange('hybrid', tls_cert=str(tmp_path / 'no.pem'), tls_key='no.key')
    with pytest.raises(AgentError, match='cannot load the exchange'):
        exchange.register_agent(Echo)


def test_the_redis_hop_needs_the_redis_password(monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid

    import redis

    from tether.agents.exchange import HybridExchange
    from tether.exceptions import AgentError
    from tether.testing import RedisServer

    server = RedisServer()
    server.start()
    try:
        admin = redis.Redis('127.0.0.1', server.port)
        admin.config_set('requirepass', 'the-password')
        admin.close()
        monkeypatch.setenv('TETHER_TEST_AGENTS_REDIS_PW', 'the-password')
        good = HybridExchange(
            '127.0.0.1',
            server.port,
            prefix=f'good-{uuid.uuid4().hex[:8]}:',
            password_env='TETHER_TEST_AGENTS_REDIS_PW',
        )
        try:
            with Manager(good, ThreadLauncher()) as manager:
                assert manager.launch(Echo()).echo(1).result(30) == 1
        finally:
            good.close()
        for password in ('wrong', None):
            if password is None:
                monkeypatch.delenv('TETHER_TEST_AGENTS_REDIS_PW')
            else:
                monkeypatch.setenv('TETHER_TEST_AGENTS_REDIS_PW', password)
            bad = HybridExchange(
                '127.0.0.1',
                server.port,
                prefix=f'bad-{uuid.uuid4().hex[:8]}:',
                password_env='TETHER_TEST_AGENTS_REDIS_PW',
            )
            with pytest.raises(AgentError, match=r'WRONGPASS|NOAUTH'):
                bad.register_agent(Echo)
            bad.close()
    finally:
        server.stop()


def test_a_pickled_exchange_carries_no_secret_and_the_system_clock() -> None:
    import pickle

    from tether._clock import SYSTEM_CLOCK
    from tether.agents.exchange import HybridExchange, RedisExchange
    from tether.testing import FakeClock

    clock = FakeClock()
    for exchange in (
        RedisExchange(password='pw-not-sent', clock=clock),
        HybridExchange(password='pw-not-sent', secret='secret-not-sent', clock=clock),
    ):
        data = pickle.dumps(exchange)
        assert b'pw-not-sent' not in data
        assert b'secret-not-sent' not in data
        copy = pickle.loads(data)
        assert type(copy.clock) is type(SYSTEM_CLOCK)
        assert exchange.clock is clock  # the original keeps its own
        assert copy.key() == exchange.key()


def test_an_exchange_config_rebuilds_it_without_its_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tether.agents.exchange import HttpExchange, HybridExchange, RedisExchange

    monkeypatch.setenv('TETHER_EXCHANGE_TOKEN', 'token-not-sent')  # the copy reads it too

    for exchange in (
        RedisExchange(password='pw-not-sent', prefix='p:', threshold=None),
        HybridExchange(password='pw-not-sent', secret='secret-not-sent', shm=False),
        HttpExchange('http://127.0.0.1:1', timeout=3.0),
    ):
        config = exchange.config()
        assert 'not-sent' not in repr(config)
        copy = type(exchange)(**config)
        assert copy.config() == config
        assert copy.key() == exchange.key()
    assert list(HybridExchange().config())[:3] == ['hostname', 'port', 'prefix']
    assert HybridExchange(shm=False).config()['shm'] is False
