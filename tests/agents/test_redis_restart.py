"""Agents and callers outlive a restart of Redis that lost its data (issue 25, item 22).

Each test runs a redis-server of its own (no persistence) on a free port and restarts
it: every mailbox, address and discovery record is gone afterwards. Agents register
their mailboxes again, callers are told about the requests that were lost with them,
and a manager still shuts its agents down promptly.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.agents._behaviors import Echo
from tether.agents import Manager
from tether.agents.exchange import HybridExchange, MailboxStatus, RedisExchange
from tether.agents.launcher import ProcessLauncher, ThreadLauncher
from tether.exceptions import AgentError, UnknownMailboxError
from tether.testing import RedisServer, redis_server_fixture, wait_until

private_redis = redis_server_fixture()


@pytest.fixture(params=['redis', 'hybrid'])
def restart_exchange(request: pytest.FixtureRequest, private_redis: RedisServer) -> Iterator[Any]:
    cls = RedisExchange if request.param == 'redis' else HybridExchange
    exchange = cls('127.0.0.1', private_redis.port, prefix=f'restart-{uuid.uuid4().hex[:8]}:')
    yield exchange
    exchange.close()


def _restart(server: RedisServer) -> None:
    server.stop()
    server.start()


def _until(condition: Callable[[], bool], what: str) -> None:
    wait_until(condition, timeout=60, message=what)


def _status(exchange: Any, agent_id: str) -> MailboxStatus | None:
    try:
        return exchange.status(agent_id)  # type: ignore[no-any-return]
    except AgentError:
        return None  # a pooled connection of before the restart


def test_an_agent_registers_its_mailbox_again_after_redis_lost_it(
    private_redis: RedisServer, restart_exchange: Any
) -> None:
    with Manager(restart_exchange, ProcessLauncher()) as manager:
        handle = manager.launch(Echo())
        pid = handle.pid().result(60)
        redis = restart_exchange.transport().redis
        secret = redis.execute('GET', f'{restart_exchange.prefix}secret')
        _restart(private_redis)
        # The agent's mailbox (and the discovery record) come back without any help.
        _until(
            lambda: _status(restart_exchange, handle.agent_id) is MailboxStatus.ACTIVE,
            'the agent registered its mailbox again',
        )
        _until(
            lambda: restart_exchange.discover(Echo) == [handle.agent_id],
            'the agent is discoverable again',
        )
        # The same process answers (this process's client mailbox came back too).
        _until(
            lambda: _status(restart_exchange, handle._mailbox().id) is MailboxStatus.ACTIVE,
            'the client mailbox registered again',
        )
        assert handle.pid().result(60) == pid
        assert handle.echo('again').result(60) == 'again'
        if isinstance(restart_exchange, HybridExchange):
            # The agent's address, and the secret that processes started from now on
            # need to reach it, are published again.
            addr = f'{restart_exchange.prefix}addr:{handle.agent_id}'
            _until(lambda: redis.execute('EXISTS', addr) == 1, 'the address is back')
            assert redis.execute('GET', f'{restart_exchange.prefix}secret') == secret
        manager.shutdown(handle, timeout=60)
        assert restart_exchange.status(handle.agent_id) is MailboxStatus.TERMINATED


def test_shutdown_right_after_redis_lost_the_mailbox_returns_promptly(
    private_redis: RedisServer, restart_exchange: Any
) -> None:
    with Manager(restart_exchange, ProcessLauncher()) as manager:
        handle = manager.launch(Echo())
        handle.ping(timeout=60)
        _restart(private_redis)
        # At once, before the agent noticed: the manager makes the mailbox again and
        # the agent, still listening on it, takes the shutdown from there. (Before the
        # fix this waited the whole timeout and raised TimeoutError.)
        manager.shutdown(handle, timeout=60)
        assert handle.agent_id not in manager.running()
        assert restart_exchange.status(handle.agent_id) is MailboxStatus.TERMINATED


def test_shutdown_of_an_agent_nobody_can_reach_is_a_prompt_clear_error(
    private_redis: RedisServer, restart_exchange: Any
) -> None:
    agent_id = restart_exchange.register_agent(Echo)
    with Manager(restart_exchange, ThreadLauncher()) as manager:
        _restart(private_redis)
        _until(
            lambda: _status(restart_exchange, agent_id) is MailboxStatus.MISSING,
            'Redis answers again',
        )
        # Not launched here, and its mailbox is gone: nobody can ask it to stop.
        with pytest.raises(UnknownMailboxError, match='lost its data'):
            manager.shutdown(agent_id, timeout=60)
        with pytest.raises(UnknownMailboxError, match='lost its data'):
            manager.shutdown(agent_id, blocking=False)


def test_requests_lost_with_redis_data_get_a_clear_error(
    private_redis: RedisServer, restart_exchange: Any
) -> None:
    # No agent runs: the request waits in the mailbox, and Redis loses both.
    handle = restart_exchange.get_handle(restart_exchange.register_agent(Echo))
    lost = handle.echo('lost')
    _restart(private_redis)
    with pytest.raises(AgentError, match='lost its data'):
        lost.result(60)


DAEMON = """
import sys
from tests.agents._behaviors import Echo
from tether.agents import Manager
from tether.agents.exchange import RedisExchange
from tether.agents.launcher import DaemonLauncher

exchange = RedisExchange('127.0.0.1', int(sys.argv[2]), prefix=sys.argv[1])
with Manager(exchange, DaemonLauncher()) as manager:
    handle = manager.launch(Echo())
    assert handle.echo(1).result(60) == 1
    print(handle.agent_id)
"""


def test_the_cli_stops_a_daemon_whose_mailbox_redis_lost(
    private_redis: RedisServer, agents_home: Any
) -> None:
    import os
    import pathlib
    import subprocess
    import sys

    from click.testing import CliRunner

    from tether.agents.launcher.daemon import daemon_records, pid_alive
    from tether.cli import cli

    root = pathlib.Path(__file__).resolve().parents[2]
    prefix = f'restart-{uuid.uuid4().hex[:8]}:'
    env = {**os.environ, 'PYTHONPATH': str(root), 'TETHER_AGENTS_HOME': str(agents_home)}
    proc = subprocess.run(
        [sys.executable, '-c', DAEMON, prefix, str(private_redis.port)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    agent_id = proc.stdout.strip().splitlines()[-1]
    pid = int(daemon_records(agents_home)[0]['pid'])
    _restart(private_redis)
    # At once, before the daemon noticed: the mailbox is made again and the request
    # reaches the daemon (before, this waited the whole timeout and said "use --force").
    stopped = CliRunner().invoke(
        cli, ['agents', 'stop', agent_id, '--home', str(agents_home), '--timeout', '60']
    )
    assert stopped.exit_code == 0, stopped.output
    assert f'{agent_id}: stopped' in stopped.output
    assert not pid_alive(pid)
