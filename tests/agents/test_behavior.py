"""Behaviors as plain objects, and their loops, timers, events and callbacks as agents."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from tests.agents._behaviors import BadLoop, Echo, Looper, Parent, Ticker
from tether.agents import Agent, Behavior, Manager, action, current_action
from tether.agents.exchange import ThreadExchange
from tether.agents.launcher import ThreadLauncher
from tether.exceptions import ActionTimeoutError, AgentError, MailboxClosedError
from tether.testing import FakeClock
from tether.testing._agent_behaviors import Slow


def test_behavior_is_a_plain_object() -> None:
    echo = Echo()
    assert echo.echo(3) == 3
    assert asyncio.run(echo.aecho(4)) == 4
    with pytest.raises(AgentError, match='not running as an agent'):
        echo.agent_id
    with pytest.raises(AgentError, match='only available inside a running action'):
        current_action()
    assert issubclass(Agent, Behavior)  # academy-py's stricter base (async only)


def test_describe_and_members() -> None:
    info = Echo.describe()
    assert set(info) >= {'echo', 'aecho', 'fail'}
    assert info['echo'].doc == 'Return the value.'
    assert set(Looper.behavior_loops()) == {
        'spin',
        'aspin',
        'tick',
        'atick',
        'on_trigger',
        'on_atrigger',
    }
    assert Echo.behavior_mro()[0].endswith('_behaviors.Echo')


def test_named_action_and_override() -> None:
    class Base(Behavior):
        @action(name='renamed')
        def f(self) -> int:
            return 1

        @action
        def g(self) -> int:
            return 2

    class Child(Base):
        def g(self) -> int:  # no longer an action
            return 3

    assert set(Base.behavior_actions()) == {'renamed', 'g'}
    assert set(Child.behavior_actions()) == {'renamed'}


def test_loops_timers_events_and_setup() -> None:
    looper = Looper()
    with Manager(ThreadExchange(), ThreadLauncher()) as manager:
        handle = manager.launch(looper)
        handle.fire().result(30)
        handle.afire().result(30)
        deadline = time.monotonic() + 30
        counts: dict[str, int] = {}
        while time.monotonic() < deadline:
            counts = handle.counts().result(30)
            if all(counts.values()):
                break
            time.sleep(0.05)
        assert all(counts.values()), counts
        assert looper.setup
        manager.shutdown(handle, timeout=30)
        prefix = f'agent-{handle.agent_id[6:14]}-'
    # The loops stopped: the agent joined their threads before it stopped.
    loops = {prefix + name for name in ('spin', 'tick', 'on_trigger')}
    assert not [t.name for t in threading.enumerate() if t.name in loops]


def test_timers_tick_on_the_exchange_clock() -> None:
    clock = FakeClock()
    ticker = Ticker()
    with Manager(ThreadExchange(clock=clock), ThreadLauncher()) as manager:
        handle = manager.launch(ticker)
        handle.ping(timeout=30)
        clock.wait_for_sleepers(2)  # the sync and the async timer wait on the clock
        assert (ticker.ticks, ticker.aticks) == (0, 0)
        clock.advance(5)
        deadline = time.monotonic() + 30
        while (ticker.ticks, ticker.aticks) != (1, 1) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (ticker.ticks, ticker.aticks) == (1, 1)
        clock.wait_for_sleepers(2)  # waiting for their next period: no tick without it
        assert (ticker.ticks, ticker.aticks) == (1, 1)
        clock.advance(4.9)
        clock.wait_for_sleepers(2)
        assert (ticker.ticks, ticker.aticks) == (1, 1)
        manager.shutdown(handle, timeout=30)


def test_a_handle_timeout_runs_on_the_exchange_clock() -> None:
    clock = FakeClock()
    with Manager(ThreadExchange(clock=clock), ThreadLauncher()) as manager:
        handle = manager.launch(Slow())
        future = handle.cooperative(600)
        raised: list[BaseException] = []

        def wait() -> None:
            try:
                future.result(timeout=60)
            except BaseException as e:
                raised.append(e)

        waiter = threading.Thread(target=wait)
        waiter.start()
        clock.wait_for_sleepers(1)  # the caller waits on the clock
        assert not raised
        clock.advance(60)
        waiter.join(30)
        assert len(raised) == 1
        assert isinstance(raised[0], ActionTimeoutError)
        # The timeout cancelled the action at the agent.
        deadline = time.monotonic() + 30
        while handle.stats().result(30)['cancelled'] != ['sync'] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert handle.stats().result(30)['cancelled'] == ['sync']


def test_loop_error_shuts_the_agent_down() -> None:
    exchange = ThreadExchange()
    launcher = ThreadLauncher()
    with Manager(exchange, launcher) as manager:
        handle = manager.launch(BadLoop())
        manager.wait(handle, timeout=30)
        failure = launcher.failure(handle.agent_id)
        assert failure is not None
        assert 'loop crashed' in repr(failure.__cause__)
        with pytest.raises(MailboxClosedError):  # failed for good: callers do not hang
            handle.ok()


def test_restart_policy_restarts_a_failing_agent() -> None:
    class Flaky(Behavior):
        starts = 0

        def on_setup(self) -> None:
            type(self).starts += 1
            if type(self).starts < 3:
                raise RuntimeError('not yet')

        @action
        def ok(self) -> int:
            return type(self).starts

    launcher = ThreadLauncher(restart=3)
    with Manager(ThreadExchange(), launcher) as manager:
        handle = manager.launch(Flaky())
        assert handle.ok().result(30) == 3
        assert launcher.restarts(handle.agent_id) == 2


def test_child_agents() -> None:
    with Manager(ThreadExchange(), ThreadLauncher()) as manager:
        parent = manager.launch(Parent())
        child_id = parent.spawn().result(30)
        assert parent.relay('hi').result(30) == 'hi'
        child = manager.get_handle(child_id)
        assert child.echo(1).result(30) == 1
        manager.shutdown(parent, timeout=30)
        # The child stopped with its parent.
        assert child.status().value == 'terminated'


def test_launch_a_class_with_arguments() -> None:
    class Greeter(Behavior):
        def __init__(self, greeting: str) -> None:
            self.greeting = greeting

        @action
        async def greet(self, name: str) -> str:
            return f'{self.greeting}, {name}'

    async def main(manager: Manager) -> Any:
        handle = manager.launch(Greeter, args=('hello',))
        return await handle.greet('world')

    with Manager(ThreadExchange()) as manager:
        assert asyncio.run(main(manager)) == 'hello, world'


class _Hang(Behavior):
    """One action at a time, each waiting until its agent shuts down."""

    max_concurrency = 1

    def __init__(self) -> None:
        self.started = threading.Event()

    @action
    async def hang(self) -> None:
        self.started.set()
        await asyncio.Event().wait()


def test_a_shutdown_answers_running_and_waiting_requests() -> None:
    hang = _Hang()
    with Manager(ThreadExchange(), ThreadLauncher()) as manager:
        handle = manager.launch(hang)
        running = handle.hang()
        assert hang.started.wait(30)
        waiting = handle.hang()  # behind the running one (max_concurrency = 1)
        handle.ping(timeout=30)  # the agent has read the second request
        manager.shutdown(handle, timeout=30)
        with pytest.raises(AgentError, match='shut down during the action'):
            running.result(30)
        with pytest.raises(AgentError, match='shut down before the action ran'):
            waiting.result(30)
