"""Daemon agents outlive the process that launched them; ``tether agents list|stop``."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap
from typing import Any

from click.testing import CliRunner

from tether.agents.launcher.daemon import pid_alive
from tether.cli import cli

ROOT = pathlib.Path(__file__).resolve().parents[2]

LAUNCH = textwrap.dedent(
    """
    import sys
    from tests.agents._behaviors import Counter
    from tether.agents import Manager
    from tether.agents.exchange import HybridExchange
    from tether.agents.launcher import DaemonLauncher

    exchange = HybridExchange(prefix=sys.argv[1])
    with Manager(exchange, DaemonLauncher(restart=1)) as manager:
        handle = manager.launch(Counter())
        assert handle.incr().result(60) == 1
        print(handle.agent_id)
    """
)


def test_daemon_outlives_its_launcher_and_is_stopped_by_the_cli(
    agent_prefix: str, agents_home: pathlib.Path, make_exchange: Any
) -> None:
    env = {**os.environ, 'PYTHONPATH': str(ROOT), 'TETHER_AGENTS_HOME': str(agents_home)}
    proc = subprocess.run(
        [sys.executable, '-c', LAUNCH, agent_prefix],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    agent_id = proc.stdout.strip().splitlines()[-1]
    # The launching process has exited; the agent still answers, with its state.
    exchange = make_exchange('hybrid')
    handle = exchange.get_handle(agent_id)
    assert handle.incr().result(60) == 2

    runner = CliRunner()
    listed = runner.invoke(cli, ['agents', 'list', '--json', '--home', str(agents_home)])
    assert listed.exit_code == 0, listed.output
    records = json.loads(listed.output)
    assert [r['agent_id'] for r in records] == [agent_id]
    assert records[0]['alive']
    assert records[0]['behavior'].endswith('Counter')
    assert records[0]['exchange']['prefix'] == agent_prefix
    pid = records[0]['pid']

    text = runner.invoke(cli, ['agents', 'list', '--home', str(agents_home)])
    assert agent_id in text.output
    assert 'running' in text.output

    stopped = runner.invoke(cli, ['agents', 'stop', agent_id, '--home', str(agents_home)])
    assert stopped.exit_code == 0, stopped.output
    assert f'{agent_id}: stopped' in stopped.output
    assert not pid_alive(pid)
    assert handle.status().value == 'terminated'
    empty = runner.invoke(cli, ['agents', 'list', '--home', str(agents_home)])
    assert 'no daemon agents' in empty.output

    unknown = runner.invoke(cli, ['agents', 'stop', 'agent-nope', '--home', str(agents_home)])
    assert unknown.exit_code == 1
    assert 'no such daemon agent' in unknown.output
    usage = runner.invoke(cli, ['agents', 'stop', '--home', str(agents_home)])
    assert usage.exit_code == 2
