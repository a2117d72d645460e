"""The agent conformance suites: the tests every exchange and launcher passes (needs pytest).

:class:`LauncherConformance` checks a launcher (see its docstring);
:class:`ExchangeConformance` checks an exchange:

Subclass :class:`ExchangeConformance` in a test module (its name must start with
``Test``) and give it a fixture named ``exchange`` that returns a fresh exchange (its own
prefix, namespace or server) and cleans up after it; pytest then runs every test of the
suite against that exchange. Agents run in threads of the test process (a
:class:`~tether.agents.launcher.ThreadLauncher`), so the suite is quick; run your
exchange across processes in tests of your own::

    import pytest

    from tether.testing.agents import ExchangeConformance


    class TestMyExchange(ExchangeConformance):
        @pytest.fixture
        def exchange(self):
            exchange = MyExchange(prefix=f'test-{uuid.uuid4().hex}:')
            yield exchange
            exchange.close()

The suite checks mailbox states, discovery (subclasses included), sync and async
actions, ``await``, ping and describe, remote exceptions with their traceback, unknown
actions, timeouts and cancellation reaching the agent, the concurrency cap under a flood,
delivery to an agent that was offline when the messages were sent, refusal of another
protocol version and of invalid envelopes (the agent keeps serving), small picklable
handles sharing one client mailbox, shutdown, and that requests left in a terminated
mailbox are answered with :class:`~tether.exceptions.MailboxClosedError`.
"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Iterator
from typing import Any

import pytest

from tether.agents import AgentSpec, Manager
from tether.agents.exchange import MailboxStatus
from tether.agents.handle import ActionFuture
from tether.agents.launcher import Launcher, RestartPolicy, ThreadLauncher
from tether.agents.message import PROTOCOL, Envelope, Request, encode
from tether.exceptions import (
    ActionTimeoutError,
    MailboxClosedError,
    MessageRejectedError,
    UnknownMailboxError,
)
from tether.testing._agent_behaviors import BrokenSetup, Echo, Other, Slow, SubEcho
from tether.testing._shared import ClassShared, class_fixture
from tether.testing._waiting import wait_until

__all__ = ['ExchangeConformance', 'LauncherConformance', 'raw_request']


def raw_request(exchange: Any, agent_id: str, header_update: dict[str, Any]) -> ActionFuture[Any]:
    """Send a hand-made ``echo(1)`` envelope, its header updated, from this process's
    client mailbox (through ``Transport.send_raw()``); return the future of its reply."""
    transport = exchange.transport()
    client = transport.client()
    future: ActionFuture[Any] = client.reserve(agent_id, 'raw')
    header, payloads = encode(
        Request(client.id, agent_id, future.tag, 'echo', (1,)), transport.codec
    )
    header.update(header_update)
    transport.send_raw(agent_id, Envelope(header, payloads).to_bytes())
    return future


class _SharedLauncher(ClassShared[Launcher]):
    """The launcher a suite class shares between its tests (:class:`ClassShared`; starting
    one may start a pool of workers). A test that closes it has the next make another."""

    def __init__(self, timeout: float) -> None:
        super().__init__()
        self.timeout = timeout

    def _end(self, current: Launcher) -> None:
        current.close(self.timeout)


class ExchangeConformance:
    """What every exchange does. Needs a fixture ``exchange`` (a fresh exchange)."""

    #: Seconds to wait for each answer the exchange owes (a broken exchange that never
    #: answers fails after this long).
    timeout: float = 30.0

    @pytest.fixture
    def manager(self, exchange: Any) -> Iterator[Manager]:
        """A manager running agents in threads over the exchange under test."""
        with Manager(exchange, ThreadLauncher()) as m:
            yield m

    def test_mailbox_states(self, exchange: Any) -> None:
        agent_id = exchange.register_agent(Echo)
        assert exchange.status(agent_id) is MailboxStatus.ACTIVE
        assert exchange.status('agent-nope') is MailboxStatus.MISSING
        exchange.terminate(agent_id)
        assert exchange.status(agent_id) is MailboxStatus.TERMINATED
        with pytest.raises(MailboxClosedError, match='terminated'):
            exchange.get_handle(agent_id).echo(1)
        with pytest.raises(UnknownMailboxError):
            exchange.get_handle('agent-nope').echo(1)

    def test_discovery_includes_subclasses(self, exchange: Any) -> None:
        echo = exchange.register_agent(Echo)
        sub = exchange.register_agent(SubEcho)
        other = exchange.register_agent(Other)
        assert exchange.discover(Echo) == sorted([echo, sub])
        assert exchange.discover(Echo, allow_subclasses=False) == [echo]
        assert exchange.discover(SubEcho) == [sub]
        assert exchange.discover(Other) == [other]
        exchange.terminate(sub)
        assert exchange.discover(Echo) == [echo]

    def test_actions_sync_async_ping_describe(self, manager: Manager) -> None:
        handle = manager.launch(Echo())
        value = {'a': (1, 2.5, None), 'b': [b'x', {3}]}
        assert handle.echo(value).result(self.timeout) == value
        assert handle.aecho('text').result(self.timeout) == 'text'
        assert handle.action('echo', 7).result(self.timeout) == 7
        assert handle.ping(timeout=self.timeout) >= 0
        info = handle.describe(timeout=self.timeout)
        assert info['echo'].doc == 'Return the value.'
        assert info['echo'].signature == '(value: Any) -> Any'
        assert info['aecho'].is_async
        assert not info['echo'].is_async

    def test_await_and_asyncio_cancellation(self, manager: Manager) -> None:
        echo = manager.launch(Echo())
        slow = manager.launch(Slow())

        async def main() -> Any:
            assert await echo.echo(5) == 5
            assert await echo.ping() >= 0
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(slow.asleep(60), 0.5)
            return await slow.stats()

        asyncio.run(main())
        wait_until(
            lambda: slow.stats().result(self.timeout)['cancelled'] == ['async'],
            message='the async action cancelled at the agent',
        )

    def test_remote_exception_with_traceback(self, manager: Manager) -> None:
        handle = manager.launch(Echo())
        with pytest.raises(ValueError, match='bad input') as info:
            handle.fail('bad input').result(self.timeout)
        assert 'in fail' in str(info.value.__cause__)  # the remote traceback
        assert 'raise ValueError(message)' in str(info.value.__cause__)

    def test_unknown_action_is_refused_and_agent_keeps_serving(self, manager: Manager) -> None:
        handle = manager.launch(Echo())
        with pytest.raises(MessageRejectedError, match="no action 'nope'"):
            handle.nope().result(self.timeout)
        assert handle.echo(1).result(self.timeout) == 1

    def test_timeout_cancels_the_action(self, manager: Manager) -> None:
        handle = manager.launch(Slow())
        with pytest.raises(ActionTimeoutError, match='cancelled at the agent'):
            handle.asleep(60).result(timeout=0.3)
        with pytest.raises(TimeoutError):  # ActionTimeoutError is a TimeoutError too
            handle.cooperative(60).result(timeout=0.3)
        wait_until(
            lambda: sorted(handle.stats().result(self.timeout)['cancelled']) == ['async', 'sync'],
            message='both actions cancelled at the agent',
        )

    def test_cancel_before_start_never_runs(self, manager: Manager) -> None:
        handle = manager.launch(Slow(), max_concurrency=1)
        handle.ping(timeout=self.timeout)
        first = handle.work(0.5)
        queued = handle.work(0.0)
        assert queued.cancel()
        assert first.result(self.timeout) == 1
        assert handle.stats().result(self.timeout)['done'] == 1

    def test_concurrency_cap_holds_under_a_flood(self, manager: Manager) -> None:
        handle = manager.launch(Slow())  # max_concurrency = 3
        futures = [handle.work(0.01) for _ in range(60)]
        assert max(f.result(60) for f in futures) == 3
        assert handle.stats().result(self.timeout) == {'peak': 3, 'done': 60, 'cancelled': []}

    def test_offline_agent_receives_messages_when_it_returns(self, exchange: Any) -> None:
        agent_id = exchange.register_agent(Echo)
        handle = exchange.get_handle(agent_id)
        futures = [handle.echo(i) for i in range(5)]  # nobody listens yet
        assert not any(f.done() for f in futures)
        with Manager(exchange, ThreadLauncher()) as manager:
            manager.launch(Echo(), agent_id=agent_id)
            assert [f.result(self.timeout) for f in futures] == list(range(5))

    def test_requests_left_in_a_terminated_mailbox_are_answered(self, exchange: Any) -> None:
        agent_id = exchange.register_agent(Echo)
        handle = exchange.get_handle(agent_id)
        futures = [handle.echo(i) for i in range(3)]  # nobody will ever take them
        exchange.terminate(agent_id)
        for future in futures:
            with pytest.raises(MailboxClosedError, match="action 'echo'; it was not run"):
                future.result(self.timeout)

    def test_other_protocol_version_is_refused_and_agent_keeps_serving(
        self, manager: Manager
    ) -> None:
        handle = manager.launch(Echo())
        future = raw_request(manager.exchange, handle.agent_id, {'v': PROTOCOL + 1})
        with pytest.raises(MessageRejectedError, match=f'protocol version {PROTOCOL + 1}'):
            future.result(self.timeout)
        assert handle.echo(2).result(self.timeout) == 2

    def test_invalid_messages_are_refused_and_agent_keeps_serving(self, manager: Manager) -> None:
        handle = manager.launch(Echo())
        exchange = manager.exchange
        future = raw_request(exchange, handle.agent_id, {'x': [{'Q': 1}]})
        with pytest.raises(MessageRejectedError, match='unknown value tag'):
            future.result(self.timeout)
        future = raw_request(exchange, handle.agent_id, {'a': 5})
        with pytest.raises(MessageRejectedError, match='action name'):
            future.result(self.timeout)
        exchange.transport().send_raw(handle.agent_id, b'garbage that is no envelope at all')
        exchange.transport().send_raw(handle.agent_id, b'TTHR')
        assert handle.echo(3).result(self.timeout) == 3

    def test_handles_pickle_small_and_share_one_mailbox(self, manager: Manager) -> None:
        a = manager.launch(Echo())
        b = manager.launch(Echo())
        data = pickle.dumps(a)
        assert len(data) < 1024
        again = pickle.loads(data)
        assert again == a
        assert again.echo(1).result(self.timeout) == 1
        client = manager.exchange.transport().client()
        f1, f2 = a.echo(1), b.echo(2)
        assert f1._mailbox is f2._mailbox is client
        assert (f1.result(self.timeout), f2.result(self.timeout)) == (1, 2)

    def test_shutdown_twice_and_via_handle(self, manager: Manager) -> None:
        handle = manager.launch(Echo())
        handle.shutdown().result(self.timeout)
        manager.shutdown(handle.agent_id, blocking=True, timeout=self.timeout)
        manager.shutdown(handle, blocking=True, timeout=self.timeout)
        assert handle.status() is MailboxStatus.TERMINATED
        with pytest.raises(MailboxClosedError):
            handle.echo(1)


class LauncherConformance:
    """What every launcher does. Subclass it in a test module (named ``Test...``) with two
    fixtures:

    * ``exchange``: a fresh exchange the launcher's agents can reach (a Redis or hybrid
      exchange for launchers that run agents in other processes);
    * ``make_launcher``: a function ``make_launcher(restart)`` returning a new launcher
      with that :class:`~tether.agents.launcher.RestartPolicy` (the suite closes it).

    ::

        class TestMyLauncher(LauncherConformance):
            @pytest.fixture
            def make_launcher(self):
                return lambda restart: MyLauncher(restart=restart)

    The suite checks that a launched agent serves its mailbox and is listed as running;
    that an agent asked to shut down ends, is waited for, and is no longer running; that
    an agent that fails at every start is restarted up to the policy's limit (restart
    counts and the failure are reported by launchers that supervise in this process) and
    then has its mailbox terminated, so that callers get
    :class:`~tether.exceptions.MailboxClosedError`; and that :meth:`Launcher.close`
    stops the agents of a launcher that is not ``detached`` (a detached launcher's agents
    keep running and stop when asked).
    """

    #: Seconds to wait for each agent to start, answer or stop.
    timeout: float = 60.0

    shared_launcher = class_fixture(
        'shared_launcher',
        lambda cls: _SharedLauncher(cls.timeout),
        "The launcher the class's tests share (closed after the class's last test).",
    )

    @pytest.fixture
    def launcher(
        self,
        make_launcher: Any,
        shared_launcher: _SharedLauncher,
        request: pytest.FixtureRequest,
    ) -> Iterator[Launcher]:
        """The class's launcher without restarts (made if there is none, or after a failed
        test); a test may close it, the next then makes another."""
        with shared_launcher.lent(request):
            yield shared_launcher.take(lambda: make_launcher(RestartPolicy()))

    def _launch(self, launcher: Launcher, exchange: Any, behavior: Any) -> str:
        agent_id: str = exchange.register_agent(type(behavior))
        launcher.launch(AgentSpec(behavior, agent_id, exchange))
        return agent_id

    def test_a_launched_agent_serves_its_mailbox(self, launcher: Launcher, exchange: Any) -> None:
        agent_id = self._launch(launcher, exchange, Echo())
        handle = exchange.get_handle(agent_id)
        assert handle.echo('hello').result(self.timeout) == 'hello'
        assert agent_id in launcher.running()
        handle.shutdown().result(self.timeout)
        assert launcher.wait(agent_id, self.timeout)

    def test_an_agent_asked_to_stop_ends(self, launcher: Launcher, exchange: Any) -> None:
        agent_id = self._launch(launcher, exchange, Echo())
        handle = exchange.get_handle(agent_id)
        handle.ping(timeout=self.timeout)
        handle.shutdown().result(self.timeout)
        assert launcher.wait(agent_id, self.timeout)
        assert agent_id not in launcher.running()
        wait_until(
            lambda: exchange.status(agent_id) is MailboxStatus.TERMINATED,
            message='the mailbox terminated',
        )
        if not launcher.detached:
            assert launcher.failure(agent_id) is None
            assert launcher.restarts(agent_id) == 0

    def test_an_agent_failing_for_good_has_its_mailbox_terminated(
        self, make_launcher: Any, exchange: Any
    ) -> None:
        launcher = make_launcher(RestartPolicy(max_restarts=1, backoff=0.0))
        try:
            agent_id = self._launch(launcher, exchange, BrokenSetup())
            assert launcher.wait(agent_id, self.timeout)
            wait_until(
                lambda: exchange.status(agent_id) is MailboxStatus.TERMINATED,
                message='the mailbox terminated',
            )
            with pytest.raises(MailboxClosedError):
                exchange.get_handle(agent_id).echo(1).result(self.timeout)
            if not launcher.detached:
                assert launcher.restarts(agent_id) == 1
                assert launcher.failure(agent_id) is not None
                assert agent_id not in launcher.running()
        finally:
            launcher.close(self.timeout)

    def test_close_stops_the_agents_of_an_attached_launcher(
        self, launcher: Launcher, shared_launcher: _SharedLauncher, exchange: Any
    ) -> None:
        try:
            agent_id = self._launch(launcher, exchange, Echo())
            handle = exchange.get_handle(agent_id)
            handle.ping(timeout=self.timeout)
        finally:
            shared_launcher.stop()  # the class's next test makes another
        if launcher.detached:
            assert agent_id in launcher.running()  # it outlives its launcher
            handle.shutdown().result(self.timeout)
        assert launcher.wait(agent_id, self.timeout)
        assert agent_id not in launcher.running()
