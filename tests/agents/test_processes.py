"""Agents in other processes: process launcher, SIGKILL and restart, Parsl HTEX pool."""

from __future__ import annotations

import os
import pathlib
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.agents._behaviors import Counter, Echo
from tests.parsl_env import parsl_environment
from tether.agents import Manager
from tether.agents.launcher import ProcessLauncher, RestartPolicy

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_agents_in_processes_talk_to_each_other(make_exchange: Any) -> None:
    with Manager(make_exchange('hybrid'), ProcessLauncher()) as manager:
        a = manager.launch(Echo())
        b = manager.launch(Echo())
        pids = {a.pid().result(60), b.pid().result(60)}
        assert os.getpid() not in pids
        assert len(pids) == 2
        # A handle passed as an argument is rebuilt on the agent's side.
        assert a.echo(b).result(60) == b
        assert a.fail('x').exception(60).args == ('x',)  # type: ignore[union-attr]


def test_sigkill_restart_restores_state_and_delivers_queued(
    distributed_exchange: Any, tmp_path: pathlib.Path
) -> None:
    launcher = ProcessLauncher(restart=RestartPolicy(max_restarts=2, backoff=0.2))
    with Manager(distributed_exchange, launcher) as manager:
        handle = manager.launch(Counter(), state_dir=str(tmp_path))
        assert [handle.incr().result(60) for _ in range(3)] == [1, 2, 3]
        old_pid = handle.pid().result(60)
        os.kill(old_pid, signal.SIGKILL)
        # Sent while the agent is dead: they wait in its mailbox.
        queued = [handle.incr() for _ in range(2)]
        assert [f.result(60) for f in queued] == [4, 5]
        assert handle.pid().result(60) != old_pid
        assert launcher.restarts(handle.agent_id) == 1
        assert handle.value().result(60) == 5


def test_restart_limit_terminates_the_mailbox(make_exchange: Any) -> None:
    from tether.exceptions import MailboxClosedError

    distributed_exchange = make_exchange('redis')
    launcher = ProcessLauncher(restart=RestartPolicy(max_restarts=1, backoff=0.1))
    with Manager(distributed_exchange, launcher) as manager:
        handle = manager.launch(Echo())
        for _ in range(2):
            pid = handle.pid().result(60)
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while launcher.pid(handle.agent_id) == pid and time.monotonic() < deadline:
                if launcher.failure(handle.agent_id) is not None:
                    break
                time.sleep(0.05)
        manager.wait(handle, timeout=60)
        assert launcher.failure(handle.agent_id) is not None
        with pytest.raises(MailboxClosedError):
            handle.echo(1)


@pytest.fixture
def parsl_config() -> Iterator[Any]:
    from parsl.config import Config
    from parsl.executors import HighThroughputExecutor
    from parsl.providers import LocalProvider

    with parsl_environment('tether-agents-parsl-') as run_dir:
        yield Config(
            executors=[
                HighThroughputExecutor(
                    label='htex',
                    address='127.0.0.1',
                    max_workers_per_node=2,
                    provider=LocalProvider(init_blocks=1, max_blocks=1),
                    encrypted=False,
                    heartbeat_period=1,
                    heartbeat_threshold=4,
                ),
            ],
            run_dir=str(run_dir),
            strategy='none',
            initialize_logging=False,
        )


def test_agents_on_a_parsl_htex_pool(
    make_exchange: Any, parsl_config: Any, tmp_path: pathlib.Path
) -> None:
    from tether.agents.launcher import ParslLauncher

    exchange = make_exchange('hybrid')
    launcher = ParslLauncher(parsl_config, restart=RestartPolicy(max_restarts=1, backoff=0.5))
    with Manager(exchange, launcher) as manager:
        counter = manager.launch(Counter(), state_dir=str(tmp_path))
        echo = manager.launch(Echo())
        assert counter.incr().result(120) == 1
        assert echo.echo(counter).result(120) == counter
        pids = {counter.pid().result(60), echo.pid().result(60)}
        assert os.getpid() not in pids
        assert len(pids) == 2
        # A worker that dies is replaced; Parsl fails the task and the launcher resubmits.
        os.kill(counter.pid().result(60), signal.SIGKILL)
        assert counter.incr().result(120) == 2
        assert launcher.restarts(counter.agent_id) == 1
