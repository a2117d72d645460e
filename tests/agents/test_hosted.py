"""The hosted exchange served by a real ``tether agents exchange serve`` process: the
exchange conformance suite, an agent in another process, academy-py's factory."""

from __future__ import annotations

import asyncio
import itertools
import pickle
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.agents import Manager
from tether.agents.aio import Manager as AsyncManager
from tether.agents.exchange import HttpExchange, HttpExchangeFactory
from tether.agents.exchange.hosted import add_user
from tether.agents.launcher import ProcessLauncher, ThreadLauncher
from tether.testing import ServerProcess, free_port
from tether.testing._agent_behaviors import Echo
from tether.testing.agents import ExchangeConformance

_USERS = 40


class _Hosted:
    def __init__(self, url: str, tokens: dict[str, str]) -> None:
        self.url = url
        self.tokens = tokens
        self._next = itertools.count()

    def fresh(self) -> str:
        """The token of a user no test used before (a user's mailboxes are all it sees)."""
        return self.tokens[f'user{next(self._next)}']


@pytest.fixture(scope='module')
def hosted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Hosted]:
    users = tmp_path_factory.mktemp('hosted') / 'users.toml'
    tokens = {f'user{i}': add_user(users, f'user{i}') for i in range(_USERS)}
    port = free_port()
    args = [sys.executable, '-c', 'from tether.cli import main; main()']
    args += ['agents', 'exchange', 'serve', '--users', str(users), '--port', str(port)]
    with ServerProcess(args, port):
        yield _Hosted(f'ws://127.0.0.1:{port}', tokens)


class TestHostedExchange(ExchangeConformance):
    @pytest.fixture
    def exchange(self, hosted: _Hosted) -> Iterator[HttpExchange]:
        exchange = HttpExchange(hosted.url, token=hosted.fresh())
        yield exchange
        exchange.close()


def test_the_token_is_never_pickled(hosted: _Hosted) -> None:
    token = hosted.fresh()
    exchange = HttpExchange(hosted.url, token=token)
    try:
        data = pickle.dumps(exchange)
        assert token.encode() not in data
        assert pickle.loads(data).key() == exchange.key()  # same process: found again
        assert 'token' not in str(exchange.config()).replace('token_env', '')
    finally:
        exchange.close()


def test_an_agent_in_another_process_answers(
    hosted: _Hosted, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The agent's process reads the token from its environment (never from the pickle).
    monkeypatch.setenv('TETHER_EXCHANGE_TOKEN', hosted.fresh())
    exchange = HttpExchange(hosted.url)
    try:
        with Manager(exchange, ProcessLauncher(start_method='spawn')) as manager:
            handle = manager.launch(Echo())
            assert handle.echo(b'x' * 1000).result(60) == b'x' * 1000
            assert handle.action('echo', {'k': [1, 2]}).result(60) == {'k': [1, 2]}
            handle.shutdown().result(60)
    finally:
        exchange.close()


def test_academy_factory_with_the_async_manager(hosted: _Hosted) -> None:
    token = hosted.fresh()

    async def main() -> Any:
        factory = HttpExchangeFactory(
            hosted.url, additional_headers={'Authorization': f'Bearer {token}'}
        )
        async with AsyncManager(await factory.create_user_client()) as manager:
            handle = await manager.launch(Echo())
            return await handle.echo('hi')

    assert asyncio.run(main()) == 'hi'
    HttpExchange(hosted.url, token=token).close()


def test_factory_refuses_what_it_cannot_do(hosted: _Hosted) -> None:
    from tether.exceptions import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match='globus'):
        HttpExchangeFactory(hosted.url, auth_method='globus')
    with pytest.raises(InvalidArgumentError, match='Bearer'):
        HttpExchangeFactory(hosted.url, additional_headers={'Authorization': 'Basic x'})
    with pytest.raises(InvalidArgumentError, match='ws://'):
        HttpExchange('redis://127.0.0.1:6379', token='t')


def test_cli_add_user_prints_a_token_once(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tether.agents.cli import agents
    from tether.agents.exchange.hosted import hash_token, load_users

    users = tmp_path / 'users.toml'
    result = CliRunner().invoke(
        agents, ['exchange', 'add-user', 'ann', '--users', str(users), '--max-mailboxes', '5']
    )
    assert result.exit_code == 0, result.output
    token = result.output.strip()
    record = load_users(users)['ann']
    assert record.token_sha256 == hash_token(token)
    assert record.limits.max_mailboxes == 5
    assert token not in users.read_text()
    assert users.stat().st_mode & 0o077 == 0


def test_academy_factory_with_the_sync_manager(hosted: _Hosted) -> None:
    token = hosted.fresh()
    factory = HttpExchangeFactory(hosted.url, token=token)
    assert token.encode() not in pickle.dumps(factory)
    exchange = factory.exchange()
    try:
        with Manager(exchange, ThreadLauncher()) as manager:
            assert manager.launch(Echo()).echo(3).result(60) == 3
    finally:
        exchange.close()


def test_clients_and_agents_come_back_after_a_server_restart(tmp_path: Path) -> None:
    users = tmp_path / 'users.toml'
    token = add_user(users, 'ann')
    port = free_port()
    args = [sys.executable, '-c', 'from tether.cli import main; main()']
    args += ['agents', 'exchange', 'serve', '--users', str(users), '--port', str(port)]
    server = ServerProcess(args, port)
    server.start()
    exchange = HttpExchange(f'ws://127.0.0.1:{port}', token=token)
    try:
        with Manager(exchange, ThreadLauncher()) as manager:
            handle = manager.launch(Echo())
            assert handle.echo(1).result(60) == 1
            server.stop()  # every mailbox is lost with it
            server.start()
            # The next request waits for the reconnection, which makes this process's
            # mailboxes and listeners again.
            assert handle.echo(2).result(60) == 2
            assert exchange.discover(Echo) == [handle.agent_id]
    finally:
        exchange.close()
        server.stop()
