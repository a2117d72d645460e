"""Agents in other processes: process launcher, SIGKILL and restart, Parsl HTEX pool."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.agents._behaviors import Counter, Echo, Stuck
from tests.parsl_env import parsl_environment
from tether.agents import Behavior, Manager, action
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


def _kill_while_holding(handle: Any, marker: pathlib.Path) -> tuple[list[Any], int]:
    """Start requests the agent will never answer, SIGKILL it once it holds them."""
    pid = handle.pid().result(60)
    held = [handle.hold(), handle.ahold()]
    queued = [handle.hold()]  # over the cap of 2: accepted, waiting for a slot
    handle.ping(timeout=60)  # answered in order, so the agent has taken the three
    while not (marker.with_suffix('.1').exists() and marker.with_suffix('.2').exists()):
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    return held + queued, pid


@pytest.mark.parametrize('kind', ['redis', 'hybrid'])
def test_requests_in_flight_when_the_agent_dies_get_a_clear_error(
    make_exchange: Any, kind: str, tmp_path: pathlib.Path
) -> None:
    from tether.exceptions import AgentCrashedError

    launcher = ProcessLauncher(restart=RestartPolicy(max_restarts=1, backoff=0.1))
    with Manager(make_exchange(kind), launcher) as manager:
        handle = manager.launch(
            Stuck(str(tmp_path / 'marker')), max_concurrency=2, state_dir=str(tmp_path)
        )
        futures, pid = _kill_while_holding(handle, tmp_path / 'marker')
        # The two that ran may have partly run; the one that waited for a slot did not.
        for future in futures[:2]:
            with pytest.raises(AgentCrashedError, match='died while running action') as info:
                future.result(120)
            assert info.value.started
        with pytest.raises(AgentCrashedError, match='before it started action') as info:
            futures[2].result(120)
        assert not info.value.started
        assert 'safe' in str(info.value)
        # The restarted agent serves again and did not re-run what it held.
        assert handle.pid().result(60) != pid
        assert handle.held().result(60) == 0
        assert launcher.restarts(handle.agent_id) == 1
        assert not list(tmp_path.glob('*.inflight.tmp'))


def test_requests_in_flight_get_an_error_when_the_agent_is_not_restarted(
    make_exchange: Any, tmp_path: pathlib.Path
) -> None:
    from tether.exceptions import AgentCrashedError, MailboxClosedError

    launcher = ProcessLauncher()  # no restarts
    with Manager(make_exchange('hybrid'), launcher) as manager:
        handle = manager.launch(
            Stuck(str(tmp_path / 'marker')), max_concurrency=2, state_dir=str(tmp_path)
        )
        futures, _ = _kill_while_holding(handle, tmp_path / 'marker')
        for future in futures:
            with pytest.raises(AgentCrashedError):
                future.result(120)
        manager.wait(handle, timeout=60)
        with pytest.raises(MailboxClosedError):
            handle.held()


def test_a_restarted_agent_answers_what_its_dead_process_left(
    make_exchange: Any, tmp_path: pathlib.Path
) -> None:
    """When nobody supervised the dead process, the next incarnation answers instead."""
    from tether.agents._journal import Journal
    from tether.agents.handle import ActionFuture
    from tether.exceptions import AgentCrashedError

    exchange = make_exchange('redis')
    agent_id = exchange.register_agent(Stuck)
    client = exchange.transport().client()
    tag = next(client._tags)
    future: ActionFuture[Any] = ActionFuture(client, agent_id, tag, 'hold')
    client._pending[tag] = future
    journal = Journal(str(tmp_path / f'{agent_id}.inflight'))
    journal.started(client.id, tag, 'hold')  # as if a process took it and died
    journal.close()
    with Manager(exchange, ProcessLauncher()) as manager:
        handle = manager.launch(
            Stuck(str(tmp_path / 'marker')), agent_id=agent_id, state_dir=str(tmp_path)
        )
        with pytest.raises(AgentCrashedError, match="action 'hold'"):
            future.result(120)
        assert handle.held().result(60) == 0
    assert not (tmp_path / f'{agent_id}.inflight').exists()


def test_a_journal_read_after_a_crash_leaves_what_was_seen(tmp_path: pathlib.Path) -> None:
    from tether.agents._journal import Journal, read_lost

    path = str(tmp_path / 'agent.inflight')
    journal = Journal(path)
    journal.started('client-a', 1, 'echo')
    journal.started('client-a', 2, 'hold')
    journal.finished('client-a', 1)
    # The process dies here: its launcher reads the journal.
    assert read_lost(path) == [('client-a', 2, 'hold')]
    assert read_lost(path) == []  # answered once only
    again = Journal(path)
    assert sorted(again.seen) == [('client-a', 1), ('client-a', 2)]
    again.close()
    assert not os.path.exists(path)  # nothing in flight at a clean stop


def test_finished_lines_of_a_burst_share_the_next_write(tmp_path: pathlib.Path) -> None:
    from tether.agents._journal import Journal, read_lost

    path = tmp_path / 'agent.inflight'
    journal = Journal(str(path))
    journal.started('client-a', 1, 'echo')
    journal.started('client-a', 2, 'echo')
    journal.finished('client-a', 1, flush=False)
    assert path.read_text().count('"-"') == 0  # waits for the next write
    journal.started('client-a', 3, 'echo')
    assert path.read_text().count('"-"') == 1
    journal.finished('client-a', 2, flush=False)
    journal.flush()  # the agent has nothing left to run
    assert read_lost(str(path)) == [('client-a', 3, 'echo')]
    journal.close()


def test_a_restarted_agent_drops_requests_its_dead_process_accepted(
    make_exchange: Any, tmp_path: pathlib.Path
) -> None:
    """A request accepted by a process that died (and not acknowledged) comes again
    through Redis: the next incarnation does not run it a second time."""
    from tether.agents.handle import ActionFuture
    from tether.agents.message import Request

    exchange = make_exchange('hybrid')
    agent_id = exchange.register_agent(Echo)
    client = exchange.transport().client()
    tag = next(client._tags)
    (tmp_path / f'{agent_id}.inflight').write_text(
        f'["+", {tag}, "{client.id}", "echo"]\n["-", {tag}, "{client.id}"]\n'
    )
    with Manager(exchange, ProcessLauncher()) as manager:
        handle = manager.launch(
            Echo(), agent_id=agent_id, state_dir=str(tmp_path), max_concurrency=1
        )
        handle.ping(timeout=60)
        again: ActionFuture[Any] = ActionFuture(client, agent_id, tag, 'echo')
        client._pending[tag] = again
        exchange.transport().send(Request(client.id, agent_id, tag, 'echo', (1,)))
        # One action at a time, in order: had the first run, its answer came first.
        assert handle.echo('after').result(60) == 'after'
        assert not again.done()


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


_SCRIPT = """
import os
import sys
import uuid

with open(os.environ['RUNS_FILE'], 'a') as f:
    f.write(f'{os.getpid()}\\n')

from tether.agents import Behavior, Manager, action
from tether.agents.exchange import HybridExchange
from tether.agents.launcher import ProcessLauncher


class Here(Behavior):
    @action
    def pid(self) -> int:
        return os.getpid()


if __name__ == '__main__':
    exchange = HybridExchange(sys.argv[1], int(sys.argv[2]), prefix=sys.argv[3])
    with Manager(exchange, ProcessLauncher()) as manager:
        handles = [manager.launch(Here()) for _ in range(3)]
        pids = {h.pid().result(60) for h in handles}
        assert len(pids) == 3 and os.getpid() not in pids
    exchange.close()
"""


def test_the_fork_server_runs_the_launching_script_once(
    agent_prefix: str, tmp_path: pathlib.Path
) -> None:
    from tests.conftest import REDIS_HOST, REDIS_PORT

    script = tmp_path / 'launch_three.py'
    script.write_text(_SCRIPT)
    runs = tmp_path / 'runs'
    from tether.agents.launcher.process import MAIN_ENV

    env = {**os.environ, 'RUNS_FILE': str(runs), 'PYTHONPATH': str(ROOT / 'src')}
    # As if inherited from a launcher in this process: the script must not run another
    # process's main module (importing tether.agents used to run it, with this value).
    env[MAIN_ENV] = f'{os.getpid()}:{__file__}'
    proc = subprocess.run(
        [sys.executable, str(script), REDIS_HOST, str(REDIS_PORT), agent_prefix],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    # The script itself and the fork server, which ran it once for the three agents
    # (a behavior defined in the script still unpickles in each of them).
    assert len(runs.read_text().split()) == 2


class _PeekJournal(Behavior):
    """Its actions return the agent's journal as they find it when they start."""

    def __init__(self, path: str) -> None:
        self.path = path

    @action
    def peek(self) -> str:
        return pathlib.Path(self.path).read_text()

    @action
    async def apeek(self) -> str:
        return pathlib.Path(self.path).read_text()


@pytest.mark.parametrize('name', ['peek', 'apeek'])
def test_an_action_runs_only_once_its_journal_line_is_written(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """The agent writes a request's journal line while the action's thread wakes up; the
    action's thread writes it itself if it gets there first (here: always)."""
    import threading

    from tether.agents._journal import Journal
    from tether.agents._runtime import AgentRuntime, AgentSpec
    from tether.agents.exchange import ThreadExchange

    delivering = threading.local()
    request, ensure = AgentRuntime._request, Journal.ensure

    def late_request(self: AgentRuntime, msg: Any) -> None:
        delivering.on = True
        try:
            request(self, msg)
        finally:
            delivering.on = False

    def late_ensure(self: Journal, number: int) -> None:
        if not getattr(delivering, 'on', False):  # the delivering thread is late
            ensure(self, number)

    monkeypatch.setattr(AgentRuntime, '_request', late_request)
    monkeypatch.setattr(Journal, 'ensure', late_ensure)
    exchange = ThreadExchange()
    agent_id = exchange.register_agent(_PeekJournal)
    path = str(tmp_path / f'{agent_id}.inflight')
    runtime = AgentRuntime(AgentSpec(_PeekJournal(path), agent_id, exchange, journal=path))
    thread = threading.Thread(target=runtime.run)
    thread.start()
    try:
        handle = exchange.get_handle(agent_id)
        future = handle.action(name)
        assert f'["+", {future.tag}, ' in future.result(30)
    finally:
        runtime.request_shutdown()
        thread.join(30)
        exchange.close()


def test_a_started_line_can_wait_for_the_next_flush(tmp_path: pathlib.Path) -> None:
    from tether.agents._journal import Journal, read_lost

    path = tmp_path / 'agent.inflight'
    journal = Journal(str(path))
    journal.started('client-a', 1, 'echo', flush=False)
    assert path.read_text() == ''
    journal.flush()
    assert read_lost(str(path)) == [('client-a', 1, 'echo')]
    journal.close()


def test_an_answered_line_goes_out_with_the_next_request(tmp_path: pathlib.Path) -> None:
    """One journal write per request: an idle agent does not write a line of its own."""
    import threading

    from tether.agents._runtime import AgentRuntime, AgentSpec
    from tether.agents.exchange import ThreadExchange

    exchange = ThreadExchange()
    agent_id = exchange.register_agent(_PeekJournal)
    path = tmp_path / f'{agent_id}.inflight'
    runtime = AgentRuntime(
        AgentSpec(_PeekJournal(str(path)), agent_id, exchange, journal=str(path))
    )
    thread = threading.Thread(target=runtime.run)
    thread.start()
    try:
        handle = exchange.get_handle(agent_id)
        first = handle.action('peek')
        first.result(30)
        # The agent is idle once the action's thread has finished with it.
        deadline = time.monotonic() + 30
        while (runtime._running or runtime._active) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not runtime._running
        assert f'["-", {first.tag}, ' not in path.read_text()
        second = handle.action('peek')
        assert f'["-", {first.tag}, ' in second.result(30)
    finally:
        runtime.request_shutdown()
        thread.join(30)
        exchange.close()
    assert not path.exists()  # everything answered: removed at the stop


def test_a_started_line_is_written_once_by_whoever_ensures_it_first(
    tmp_path: pathlib.Path,
) -> None:
    from tether.agents._journal import Journal

    path = tmp_path / 'agent.inflight'
    journal = Journal(str(path))
    first = journal.started('client-a', 1, 'echo', flush=False)
    journal.finished('client-a', 1, flush=False)
    second = journal.started('client-a', 2, 'echo', flush=False)
    journal.ensure(first)  # writes everything waiting, the second line included
    size = path.stat().st_size
    journal.finished('client-a', 2, flush=False)
    journal.ensure(second)  # already written: the answered line keeps waiting
    assert path.stat().st_size == size
    assert path.read_text().count('"+"') == 2
    journal.close()
