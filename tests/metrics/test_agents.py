"""A daemon agent's Prometheus metrics, scraped while callers use it, across a restart."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.agents._behaviors import Echo
from tests.conftest import REDIS_HOST, REDIS_PORT, RUN_ID
from tests.faas.conftest import wait_for
from tests.metrics._scrape import scrape, status_of, value
from tether._serve.metrics import MetricsOptions
from tether.agents import Manager
from tether.agents.launcher import DaemonLauncher

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def daemon_env(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> pathlib.Path:
    # The supervisor imports the behavior from the tests package.
    monkeypatch.setenv('PYTHONPATH', str(ROOT))
    home = tmp_path / 'agents'
    monkeypatch.setenv('TETHER_AGENTS_HOME', str(home))
    return home


@pytest.fixture
def exchange(redis_available: None) -> Iterator[Any]:
    import redis

    from tether.agents.exchange import RedisExchange

    prefix = f'tether-test-{RUN_ID}-agent-metrics-{uuid.uuid4().hex[:8]}:'
    ex = RedisExchange(REDIS_HOST, REDIS_PORT, prefix=prefix)
    yield ex
    ex.close()
    client = redis.Redis(REDIS_HOST, REDIS_PORT)
    keys = list(client.scan_iter(match=f'{prefix}*', count=1000))
    if keys:
        client.delete(*keys)
    client.close()


def _record(home: pathlib.Path, agent_id: str) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((home / 'daemons' / f'{agent_id}.json').read_text())
    return record


def _settled(address: tuple[str, int], action: str, calls: int) -> str:
    """A scrape once ``calls`` calls of ``action`` were counted (an answer goes out just
    before its call is counted)."""
    texts: list[str] = []

    def counted() -> bool:
        texts[:] = [scrape(address, 'agent-metrics')]
        return value(texts[0], 'tether_agent_actions_total', action=action) >= calls

    wait_for(counted, what=f'{calls} calls of {action} to be counted')
    return texts[0]


def _state(pid: int) -> str:
    """The process's state letter (``T``: stopped by a signal)."""
    stat = pathlib.Path(f'/proc/{pid}/stat').read_text()
    return stat.rsplit(')', 1)[1].split()[0]


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix('http://').removesuffix('/metrics').rsplit(':', 1)
    return host, int(port)


def test_daemon_agent_metrics_move_with_traffic_and_restarts(
    daemon_env: pathlib.Path, exchange: Any, tmp_path: pathlib.Path
) -> None:
    token = tmp_path / 'metrics.token'
    token.write_text('agent-metrics')
    options = MetricsOptions(port=0, token_file=str(token))
    launcher = DaemonLauncher(home=daemon_env, restart=2, metrics=options)
    with Manager(exchange, launcher) as manager:
        echo = manager.launch(Echo())
        try:
            assert [echo.echo(i).result(60) for i in range(20)] == list(range(20))
            with pytest.raises(ValueError, match='on purpose'):
                echo.fail('on purpose').result(60)
            record = _record(daemon_env, echo.agent_id)
            address = _address(record['metrics'])
            assert address[0] == '127.0.0.1'
            assert status_of(address) == 401
            assert status_of(address, 'wrong') == 401
            _settled(address, 'fail', 1)
            text = _settled(address, 'echo', 20)
            assert (
                value(text, 'tether_server_info', kind='agent-daemon', name=record['behavior'])
                == 1
            )
            assert value(text, 'tether_agents', status='running') == 1
            assert value(text, 'tether_agents', status='restarting') == 0
            assert value(text, 'tether_agent_restarts_total') == 0
            assert value(text, 'tether_agent_starts_total') == 1
            assert value(text, 'tether_agent_actions_total', action='echo') == 20
            assert value(text, 'tether_agent_action_errors_total', action='echo') == 0
            assert value(text, 'tether_agent_action_errors_total', action='fail') == 1
            assert value(text, 'tether_agent_action_seconds_count', action='echo') == 20
            assert (
                value(text, 'tether_agent_action_seconds_bucket', action='echo', le='+Inf') == 20
            )
            assert value(text, 'tether_agent_requests_in_progress') == 0
            assert value(text, 'tether_agent_mailbox_messages') == 0
            assert echo.agent_id not in text

            # The agent's process stopped: what callers send waits in its mailbox.
            pid = echo.pid().result(60)
            os.kill(pid, signal.SIGSTOP)
            try:
                wait_for(lambda: _state(pid) == 'T', what='the agent process to stop')
                waiting = [echo.echo(i) for i in range(5)]

                def depth() -> float:
                    return value(scrape(address, 'agent-metrics'), 'tether_agent_mailbox_messages')

                # Sends reach Redis in the background; the stopped listener's last BLMOVE
                # may still take one of them (Redis moves it).
                wait_for(lambda: depth() >= 4, what='the messages to wait in the mailbox')
                assert depth() <= 5
            finally:
                os.kill(pid, signal.SIGCONT)
            assert [f.result(60) for f in waiting] == list(range(5))
            _settled(address, 'echo', 25)  # counted before the process dies

            # Killed: the supervisor restarts it; the counters carry on.
            os.kill(pid, signal.SIGKILL)
            assert echo.echo('back').result(60) == 'back'
            text = _settled(address, 'echo', 26)
            assert value(text, 'tether_agent_restarts_total') == 1
            assert value(text, 'tether_agent_starts_total') == 2
            assert value(text, 'tether_agents', status='running') == 1
            assert value(text, 'tether_agent_actions_total', action='echo') == 26
        finally:
            manager.shutdown(echo, blocking=True)
    # The supervisor is gone, and with it the endpoint and the shared block.
    wait_for(lambda: _refused(address), what='the endpoint to close')
    assert not (daemon_env / 'daemons' / f'{echo.agent_id}.metrics').exists()


def _refused(address: tuple[str, int]) -> bool:
    import urllib.error

    try:
        scrape(address, 'agent-metrics')
    except (urllib.error.URLError, ConnectionError):
        return True
    return False


def test_daemon_agent_metrics_off_by_default(daemon_env: pathlib.Path, exchange: Any) -> None:
    with Manager(exchange, DaemonLauncher(home=daemon_env)) as manager:
        echo = manager.launch(Echo())
        try:
            assert echo.echo(1).result(60) == 1
            record = _record(daemon_env, echo.agent_id)
            assert record['metrics'] is None
            assert not (daemon_env / 'daemons' / f'{echo.agent_id}.metrics').exists()
        finally:
            manager.shutdown(echo, blocking=True)


def test_metrics_off_loopback_needs_a_token() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match='bearer token'):
        MetricsOptions(port=0, bind='0.0.0.0')


def test_cli_daemon_with_metrics(
    daemon_env: pathlib.Path, exchange: Any, tmp_path: pathlib.Path
) -> None:
    import subprocess
    import sys

    token = tmp_path / 'metrics.token'
    token.write_text('cli-agent-metrics')
    tether = [sys.executable, '-c', 'from tether.cli import main; main()', 'agents']
    home = ['--home', str(daemon_env)]
    started = subprocess.run(
        [*tether, 'daemon', 'tests.agents._behaviors:Echo', '--prefix', exchange.prefix,
         '--restart', '1', '--metrics-port', '0', '--metrics-token-file', str(token),
         '--json', *home],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    record = json.loads(started.stdout)
    agent_id = record['agent_id']
    try:
        echo = exchange.get_handle(agent_id)
        assert [echo.echo(i).result(60) for i in range(3)] == [0, 1, 2]
        address = _address(record['metrics'])
        assert status_of(address) == 401
        texts: list[str] = []

        def counted() -> bool:
            texts[:] = [scrape(address, 'cli-agent-metrics')]
            return value(texts[0], 'tether_agent_actions_total', action='echo') >= 3

        wait_for(counted, what='the calls to be counted')
        assert value(texts[0], 'tether_agents', status='running') == 1
        listed = subprocess.run(
            [*tether, 'list', *home], capture_output=True, text=True, timeout=60, check=True
        )
        assert f'metrics {record["metrics"]}' in listed.stdout
    finally:
        stopped = subprocess.run(
            [*tether, 'stop', agent_id, '--force', *home],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert stopped.returncode == 0, stopped.stderr
    wait_for(lambda: _refused(address), what='the endpoint to close')


@pytest.mark.parametrize(
    ('args', 'message'),
    [
        (['tests.agents._behaviors:Nope'], 'cannot import'),
        (['json:dumps'], 'not a Behavior class'),
        (['tests.agents._behaviors:Echo', '--metrics-port', '0', '--metrics-bind', '0.0.0.0'],
         'bearer token'),
        (['tests.agents._behaviors:Echo', '--kwargs', '[1]'], 'JSON object'),
    ],
)  # fmt: skip
def test_cli_daemon_refuses(daemon_env: pathlib.Path, args: list[str], message: str) -> None:
    from click.testing import CliRunner

    from tether.cli import cli

    result = CliRunner().invoke(cli, ['agents', 'daemon', *args, '--home', str(daemon_env)])
    assert result.exit_code == 2, result.output
    assert message in result.output
    daemons = daemon_env / 'daemons'
    assert not daemons.exists() or not list(daemons.glob('*.json'))
