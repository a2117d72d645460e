"""One conformance suite over every exchange (``EXCHANGE_FACTORIES`` in conftest.py).

Agents run in threads of this process here, so the suite stays fast; the process, Parsl
and daemon tests run the distributed exchanges across real processes.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.agents._behaviors import CustomError, Echo, Other, Slow, SubEcho
from tether.agents import Manager
from tether.agents._message import (
    PROTOCOL,
    REQUEST,
    RESPONSE,
    Message,
    encode,
    encode_bytes,
)
from tether.agents.exchange import MailboxStatus
from tether.agents.launcher import ThreadLauncher
from tether.exceptions import (
    ActionError,
    ActionTimeoutError,
    MailboxClosedError,
    MessageRejectedError,
    UnknownMailboxError,
)


@pytest.fixture
def manager(exchange: Any) -> Iterator[Manager]:
    with Manager(exchange, ThreadLauncher()) as m:
        yield m


def test_mailbox_states(exchange: Any) -> None:
    agent_id = exchange.register_agent(Echo)
    assert exchange.status(agent_id) is MailboxStatus.ACTIVE
    assert exchange.status('agent-nope') is MailboxStatus.MISSING
    exchange.terminate(agent_id)
    assert exchange.status(agent_id) is MailboxStatus.TERMINATED
    with pytest.raises(MailboxClosedError, match='terminated'):
        exchange.get_handle(agent_id).echo(1)
    with pytest.raises(UnknownMailboxError):
        exchange.get_handle('agent-nope').echo(1)


def test_discovery_includes_subclasses(exchange: Any) -> None:
    echo = exchange.register_agent(Echo)
    sub = exchange.register_agent(SubEcho)
    other = exchange.register_agent(Other)
    assert exchange.discover(Echo) == sorted([echo, sub])
    assert exchange.discover(Echo, allow_subclasses=False) == [echo]
    assert exchange.discover(SubEcho) == [sub]
    assert exchange.discover(Other) == [other]
    exchange.terminate(sub)
    assert exchange.discover(Echo) == [echo]


def test_actions_sync_async_ping_describe(manager: Manager) -> None:
    handle = manager.launch(Echo())
    assert handle.echo({'a': (1, 2.5, None), 'b': [b'x', {3}]}).result(30) == {
        'a': (1, 2.5, None),
        'b': [b'x', {3}],
    }
    assert handle.aecho('text').result(30) == 'text'
    assert handle.action('echo', 7).result(30) == 7
    assert handle.ping(timeout=30) >= 0
    info = handle.describe(timeout=30)
    assert info['echo'].doc == 'Return the value.'
    assert info['echo'].signature == '(value: Any) -> Any'
    assert info['aecho'].is_async
    assert not info['echo'].is_async


def test_await_and_asyncio_cancellation(manager: Manager) -> None:
    import asyncio

    echo = manager.launch(Echo())
    slow = manager.launch(Slow())

    async def main() -> Any:
        assert await echo.echo(5) == 5
        assert await echo.ping() >= 0
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(slow.asleep(60), 0.5)
        return await slow.stats()

    stats = asyncio.run(main())
    deadline = time.monotonic() + 30
    while 'async' not in stats['cancelled'] and time.monotonic() < deadline:
        time.sleep(0.05)
        stats = slow.stats().result(30)
    assert stats['cancelled'] == ['async']


def test_remote_exception_with_traceback(manager: Manager) -> None:
    handle = manager.launch(Echo())
    with pytest.raises(ValueError, match='bad input') as info:
        handle.fail('bad input').result(30)
    assert 'in fail' in str(info.value.__cause__)  # the remote traceback
    assert 'raise ValueError(message)' in str(info.value.__cause__)


def test_unknown_action_is_refused_and_agent_keeps_serving(manager: Manager) -> None:
    handle = manager.launch(Echo())
    with pytest.raises(MessageRejectedError, match="no action 'nope'"):
        handle.nope().result(30)
    assert handle.echo(1).result(30) == 1


def test_timeout_cancels_the_action(manager: Manager) -> None:
    handle = manager.launch(Slow())
    with pytest.raises(ActionTimeoutError, match='cancelled at the agent'):
        handle.asleep(60).result(timeout=0.3)
    with pytest.raises(TimeoutError):  # ActionTimeoutError is a TimeoutError too
        handle.cooperative(60).result(timeout=0.3)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if sorted(handle.stats().result(30)['cancelled']) == ['async', 'sync']:
            break
        time.sleep(0.05)
    assert sorted(handle.stats().result(30)['cancelled']) == ['async', 'sync']


def test_cancel_before_start_never_runs(manager: Manager) -> None:
    handle = manager.launch(Slow(), max_concurrency=1)
    handle.ping(timeout=30)
    first = handle.work(0.5)
    queued = handle.work(0.0)
    assert queued.cancel()
    assert first.result(30) == 1
    assert handle.stats().result(30)['done'] == 1


def test_concurrency_cap_holds_under_a_flood(manager: Manager) -> None:
    handle = manager.launch(Slow())  # max_concurrency = 3
    futures = [handle.work(0.01) for _ in range(60)]
    assert max(f.result(60) for f in futures) == 3
    assert handle.stats().result(30) == {'peak': 3, 'done': 60, 'cancelled': []}


def test_offline_agent_receives_messages_when_it_returns(exchange: Any) -> None:
    agent_id = exchange.register_agent(Echo)
    handle = exchange.get_handle(agent_id)
    futures = [handle.echo(i) for i in range(5)]  # nobody listens yet
    time.sleep(0.2)
    assert not any(f.done() for f in futures)
    with Manager(exchange, ThreadLauncher()) as manager:
        manager.launch(Echo(), agent_id=agent_id)
        assert [f.result(30) for f in futures] == list(range(5))


def _raw_request(exchange: Any, agent_id: str, header_update: dict[str, Any]) -> Any:
    """Send a hand-made envelope from this process's client mailbox; return its future."""
    from tether._wire import encode_head
    from tether.agents._message import AGENT_MESSAGE
    from tether.agents.handle import ActionFuture

    client = exchange.transport().client()
    tag = 10_000_000 + int(time.monotonic_ns() % 1_000_000)
    future: ActionFuture[Any] = ActionFuture(client, agent_id, tag, 'raw')
    client._pending[tag] = future
    msg = Message(REQUEST, client.id, agent_id, tag, 'echo', (1,))
    header, payloads = encode(msg, exchange.transport().codec)
    header.update(header_update)
    data = b''.join([encode_head(AGENT_MESSAGE, header, [len(p) for p in payloads]), *payloads])
    exchange.transport().send_raw(agent_id, data)
    return future


def test_other_protocol_version_is_refused_and_agent_keeps_serving(manager: Manager) -> None:
    handle = manager.launch(Echo())
    exchange = manager.exchange
    future = _raw_request(exchange, handle.agent_id, {'v': PROTOCOL + 1})
    with pytest.raises(MessageRejectedError, match=f'protocol version {PROTOCOL + 1}'):
        future.result(30)
    assert handle.echo(2).result(30) == 2


def test_invalid_messages_are_refused_and_agent_keeps_serving(manager: Manager) -> None:
    handle = manager.launch(Echo())
    exchange = manager.exchange
    future = _raw_request(exchange, handle.agent_id, {'x': [{'Q': 1}]})
    with pytest.raises(MessageRejectedError, match='unknown value tag'):
        future.result(30)
    future = _raw_request(exchange, handle.agent_id, {'a': 5})
    with pytest.raises(MessageRejectedError, match='action name'):
        future.result(30)
    exchange.transport().send_raw(handle.agent_id, b'garbage that is no envelope at all')
    exchange.transport().send_raw(handle.agent_id, b'TTHR')
    assert handle.echo(3).result(30) == 3


def test_handles_pickle_small_and_share_one_mailbox(manager: Manager) -> None:
    a = manager.launch(Echo())
    b = manager.launch(Echo())
    data = pickle.dumps(a)
    assert len(data) < 1024
    again = pickle.loads(data)
    assert again == a
    assert again.echo(1).result(30) == 1
    transport = manager.exchange.transport()
    client = transport.client()
    f1, f2 = a.echo(1), b.echo(2)
    assert f1._mailbox is f2._mailbox is client
    assert (f1.result(30), f2.result(30)) == (1, 2)


def test_shutdown_twice_and_via_handle(manager: Manager) -> None:
    handle = manager.launch(Echo())
    handle.shutdown().result(30)
    manager.shutdown(handle.agent_id, blocking=True, timeout=30)
    manager.shutdown(handle, blocking=True, timeout=30)
    assert handle.status() is MailboxStatus.TERMINATED
    with pytest.raises(MailboxClosedError):
        handle.echo(1)


def test_results_that_cannot_be_sent_become_errors(make_exchange: Any) -> None:
    exchange = make_exchange('redis')
    with Manager(exchange, ThreadLauncher()) as manager:
        handle = manager.launch(Echo())
        with pytest.raises(MessageRejectedError, match='pickled value'):
            handle.echo(CustomError('x')).result(30)
        # The remote exception type is unknown here without pickle: ActionError.
        with pytest.raises(ActionError, match='CustomError: custom failure') as info:
            handle.fail_custom().result(30)
        assert 'raise CustomError' in info.value.remote_traceback


def test_pickle_allowed_when_the_receiver_allows_it(make_exchange: Any) -> None:
    exchange = make_exchange('redis', allow_pickle=True)
    with Manager(exchange, ThreadLauncher()) as manager:
        handle = manager.launch(Echo())
        value = handle.echo(CustomError('x')).result(30)
        assert isinstance(value, CustomError)
        with pytest.raises(CustomError, match='custom failure'):
            handle.fail_custom().result(30)


@pytest.mark.parametrize('kind', ['redis', 'hybrid'])
def test_large_values_travel_by_proxy(make_exchange: Any, kind: str) -> None:
    import numpy as np

    from tether.proxy import Proxy

    exchange = make_exchange(kind, threshold=10_000)
    with Manager(exchange, ThreadLauncher()) as manager:
        handle = manager.launch(Echo())
        array = np.arange(100_000, dtype=np.float64)
        back = handle.echo(array).result(30)
        assert type(back) is Proxy  # lazily resolved through the exchange's store
        assert np.array_equal(back, array)
        assert handle.nbytes(b'y' * 50_000).result(30) == 50_000
        big = handle.make_bytes(200_000).result(30)
        assert big == b'x' * 200_000
        # The message carried a reference, not the data.
        msg = Message(RESPONSE, 'a', 'b', 1, result=b'z' * 100_000)
        assert len(encode_bytes(msg, exchange.transport().codec)) < 1_000
