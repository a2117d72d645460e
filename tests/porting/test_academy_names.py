"""academy-py 1.0's names and call shapes, as tether provides them (docs/porting.md)."""

from __future__ import annotations

import asyncio
import pathlib
import pickle
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tether.agents import Agent, Behavior, action, loop
from tether.agents import Manager as SyncManager
from tether.agents.aio import Manager
from tether.agents.exceptions import (
    AgentNotInitializedError,
    AgentTerminatedError,
    AlreadyLaunchedError,
    BadEntityIdError,
    ExchangeClientNotFoundError,
    LaunchBatchClosedError,
    MailboxTerminatedError,
    UnknownActionError,
)
from tether.agents.exchange import (
    AgentStats,
    HybridExchangeFactory,
    LocalExchangeFactory,
    MailboxStatus,
    RedisExchangeFactory,
    ThreadExchange,
    UserExchangeClient,
)
from tether.agents.handle import Handle, ProxyHandle
from tether.agents.identifier import AgentId, UserId, entity_id
from tether.agents.state import FileState
from tether.exceptions import (
    AgentError,
    BehaviorDefinitionError,
    InvalidArgumentError,
    MailboxClosedError,
    MessageRejectedError,
    UnknownMailboxError,
)


class Counter(Agent):
    def __init__(self, start: int = 0) -> None:
        self.start = start
        self.count = -1
        self.stopped = threading.Event()

    async def agent_on_startup(self) -> None:
        self.count = self.start

    async def agent_on_shutdown(self) -> None:
        self.stopped.set()

    @action
    async def add(self, value: int) -> None:
        self.count += value

    @action
    async def get(self) -> int:
        return self.count


class Caller(Agent):
    @action(context=True)
    async def who(self, context: Any) -> str:
        return str(context.caller)

    @action
    async def ask(self, other: Any) -> int:
        return int(await other.get())


def test_on_startup_and_on_shutdown_hooks_are_called() -> None:
    behavior = Counter(5)
    with SyncManager(ThreadExchange()) as manager:
        handle = manager.launch(behavior)
        assert handle.get().result(timeout=30) == 5  # set by agent_on_startup
        manager.shutdown(handle, timeout=30)
    assert behavior.stopped.is_set()


def test_sync_hooks_and_their_order() -> None:
    calls: list[str] = []

    class Hooks(Behavior):
        def on_setup(self) -> None:
            calls.append('on_setup')

        def agent_on_startup(self) -> None:  # type: ignore[override]
            calls.append('agent_on_startup')

        def agent_on_shutdown(self) -> None:  # type: ignore[override]
            calls.append('agent_on_shutdown')

        def on_shutdown(self) -> None:
            calls.append('on_shutdown')

    with SyncManager(ThreadExchange()) as manager:
        manager.shutdown(manager.launch(Hooks()), timeout=30)
    assert calls == ['on_setup', 'agent_on_startup', 'agent_on_shutdown', 'on_shutdown']


def test_action_with_context() -> None:
    with SyncManager(ThreadExchange()) as manager:
        handle = manager.launch(Caller())
        assert handle.who().result(timeout=30).startswith('client-')
        assert 'context' not in handle.describe(timeout=30)['who'].signature


def test_action_context_needs_a_parameter() -> None:
    with pytest.raises(BehaviorDefinitionError, match='context'):

        class Bad(Agent):
            @action(context=True)
            async def f(self) -> None: ...


def test_ids() -> None:
    aid = AgentId[Any].new(name='counter')
    assert (aid.role, aid.name) == ('agent', 'counter')
    assert isinstance(aid.uid, uuid.UUID)
    assert aid.uid.hex in aid
    assert aid == aid.mailbox_id == f'{aid}'
    assert aid.mailbox_id.startswith('agent-')
    assert hash(aid) == hash(aid.mailbox_id)
    assert str(aid) == 'AgentId<counter>'  # printed as academy-py prints it
    assert str(AgentId[Any](uid=aid.uid)) == f'AgentId<{aid.uid.hex[:8]}>'
    assert AgentId[Any](aid) == aid
    assert AgentId[Any](uid=aid.uid, name='other') == aid  # the name is not the id
    again = pickle.loads(pickle.dumps(aid))
    assert type(again) is AgentId
    assert again.name == 'counter'
    assert again == aid
    uid = UserId.new()
    assert uid.role == 'user'
    assert uid.startswith('client-')
    assert isinstance(entity_id(uid.mailbox_id), UserId)
    assert isinstance(entity_id(aid.mailbox_id), AgentId)
    with pytest.raises(InvalidArgumentError):
        AgentId('client-123')
    assert AgentId[Any](uid=aid.uid, name='other') == aid  # academy-py's keyword form


def test_exception_names_catch_what_tether_raises() -> None:
    assert MailboxTerminatedError is MailboxClosedError is AgentTerminatedError
    assert BadEntityIdError is UnknownMailboxError
    exchange = ThreadExchange()
    with SyncManager(exchange) as manager:
        handle = manager.launch(Counter())
        manager.shutdown(handle, timeout=30)
        with pytest.raises(AgentTerminatedError):
            handle.get().result(timeout=30)


def test_file_state(tmp_path: pathlib.Path) -> None:
    path = tmp_path / 'state.db'
    with FileState[str](path) as state:
        state['key'] = 'value'
    with FileState[str](path) as state:
        assert state['key'] == 'value'


def test_async_manager_launch_use_and_shutdown() -> None:
    async def main() -> None:
        async with await Manager.from_exchange_factory(
            LocalExchangeFactory(), executors=ThreadPoolExecutor(4)
        ) as manager:
            assert isinstance(manager.exchange_client, UserExchangeClient)
            assert manager.user_id.role == 'user'
            first = await manager.launch(Counter(1))
            second = await manager.launch(Counter, args=(10,), name='second')
            assert isinstance(first.agent_id, AgentId)
            second_id = second.agent_id
            assert isinstance(second_id, AgentId)
            assert second_id.name == 'second'
            await first.add(2)
            assert await first.get() == 3
            assert await second.get() == 10
            assert manager.running() == {first.agent_id, second.agent_id}
            await manager.shutdown(first)
            await manager.shutdown(first)  # harmless
            assert manager.running() == {second.agent_id}
            status = await manager.exchange_client.status(first.agent_id)
            assert status is MailboxStatus.TERMINATED
            found = await manager.exchange_client.discover(Counter)
            assert found == (second.agent_id,)
        assert manager.running() == set()  # leaving the block stops the agents

    asyncio.run(main())


def test_async_manager_refuses_what_it_cannot_use() -> None:
    async def main() -> None:
        client = await LocalExchangeFactory().create_user_client()
        with pytest.raises(ValueError, match='Invalid executors'):
            Manager(client, executors=ThreadPoolExecutor)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match='No executor named'):
            Manager(client, default_executor='gpu')
        async with Manager(client) as manager:
            registration = await manager.register_agent(Counter)
            with pytest.raises(BadEntityIdError):
                await manager.shutdown(registration.agent_id)
            with pytest.raises(BadEntityIdError):
                await manager.wait([registration.agent_id])
            await manager.launch(Counter(), registration=registration)
            with pytest.raises(RuntimeError):
                await manager.launch(Counter(), registration=registration)
            assert issubclass(AlreadyLaunchedError, RuntimeError)

    asyncio.run(main())


def test_async_manager_wait_times_out() -> None:
    class Waits(Agent):
        @loop
        async def idle(self, shutdown: asyncio.Event) -> None:
            await shutdown.wait()

    async def main() -> None:
        async with await Manager.from_exchange_factory(LocalExchangeFactory()) as manager:
            handle = await manager.launch(Waits)
            with pytest.raises(TimeoutError):
                await manager.wait([handle], timeout=0.01)
            await manager.shutdown(handle, timeout=30)
            await manager.wait([handle], timeout=30)

    asyncio.run(main())


def test_launch_batch_handles_are_usable_by_siblings() -> None:
    async def main() -> None:
        async with await Manager.from_exchange_factory(LocalExchangeFactory()) as manager:
            async with manager.launch_batch() as batch:
                counter = await batch.queue(Counter, args=(7,))
                caller = await batch.queue(Caller())
                assert manager.running() == set()  # launched when the block ends
            assert len(manager.running()) == 2
            assert await caller.ask(counter) == 7
            with pytest.raises(LaunchBatchClosedError):
                await batch.queue(Counter)
            assert issubclass(LaunchBatchClosedError, RuntimeError)

    asyncio.run(main())


@pytest.fixture
def redis_prefix(redis_available: None) -> Iterator[str]:
    import redis

    prefix = f'test-academy-{uuid.uuid4().hex[:8]}:'
    yield prefix
    client = redis.Redis()
    for key in client.scan_iter(f'{prefix}*'):
        client.delete(key)
    client.close()


@pytest.mark.parametrize('kind', ['redis', 'hybrid'])
def test_redis_and_hybrid_factories(kind: str, redis_prefix: str) -> None:
    async def main() -> None:
        if kind == 'redis':
            factory: Any = RedisExchangeFactory('127.0.0.1', 6379, prefix=redis_prefix)
        else:
            factory = HybridExchangeFactory(
                '127.0.0.1', 6379, redis_kwargs={'prefix': redis_prefix}
            )
        async with await Manager.from_exchange_factory(factory) as manager:
            handle = await manager.launch(Counter, args=(3,))
            assert await handle.get() == 3
            await manager.shutdown(handle, timeout=30)
        factory.exchange().close()

    asyncio.run(main())


class FailsAtStart(Agent):
    async def agent_on_startup(self) -> None:
        raise RuntimeError('no start')


def test_agent_failure_is_raised_by_wait_and_close() -> None:
    async def main() -> None:
        client = await LocalExchangeFactory().create_user_client()
        manager = Manager(client)
        handle = await manager.launch(FailsAtStart)
        await manager.wait([handle], timeout=30)  # raise_error=False: no error
        with pytest.raises(RuntimeError, match='no start'):
            await manager.wait([handle], raise_error=True, timeout=30)
        with pytest.raises(RuntimeError, match='no start'):
            await manager.close()

    asyncio.run(main())


def test_executor_gets_submit_kwargs_and_overload_warns() -> None:
    seen: list[dict[str, Any]] = []

    class Recording(ThreadPoolExecutor):
        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            seen.append(kwargs)
            return super().submit(fn, *args, **kwargs)

    class Idle(Agent):
        @loop
        async def idle(self, shutdown: asyncio.Event) -> None:
            await shutdown.wait()

    async def main() -> None:
        factory = LocalExchangeFactory()
        async with await Manager.from_exchange_factory(factory, Recording(1)) as manager:
            first = await manager.launch(Idle, submit_kwargs={'resource': {'cores': 1}})
            await first.ping(timeout=30)
            with pytest.warns(RuntimeWarning, match='Executor overload'):
                await manager.launch(Idle)

    asyncio.run(main())
    assert seen[0] == {'resource': {'cores': 1}}


def test_local_factory_refuses_pickling() -> None:
    with pytest.raises(pickle.PicklingError, match='LocalExchangeFactory'):
        pickle.dumps(LocalExchangeFactory())


class Forwarder(Agent):
    @action
    async def forward(self, agent_id: str) -> int:
        return int(await Handle(agent_id).get())  # the agent's own exchange


def test_handle_without_exchange_uses_the_context() -> None:
    async def main() -> None:
        factory = LocalExchangeFactory()
        async with await Manager.from_exchange_factory(factory) as manager:
            counter = await manager.launch(Counter, args=(4,))
            bare: Handle[Any] = Handle(counter.agent_id)
            assert await bare.get() == 4  # inside async with: the manager's exchange
            forwarder = await manager.launch(Forwarder)
            assert await forwarder.forward(counter.agent_id) == 4
            assert pickle.loads(pickle.dumps(bare)) == counter
        with pytest.raises(ExchangeClientNotFoundError):
            await bare.get()
        with pytest.raises(pickle.PicklingError, match='unbound'):
            pickle.dumps(bare)

    asyncio.run(main())


class Mixed(Behavior):
    def __init__(self) -> None:
        self.value = 1

    @action
    def double(self) -> int:  # a synchronous action
        self.value *= 2
        return self.value

    def helper(self) -> None: ...


def test_proxy_handle_calls_the_behavior_directly() -> None:
    async def main() -> None:
        counter = Counter(2)
        await counter.agent_on_startup()  # a proxy does not start its behavior
        proxy = ProxyHandle(counter)
        await proxy.add(3)
        assert await proxy.action('get') == 5
        assert await proxy.ping() == 0
        with pytest.raises(AttributeError, match="'missing'"):
            await proxy.missing()
        mixed = ProxyHandle(Mixed())
        assert await mixed.double() == 2
        with pytest.raises(AttributeError, match='not a method marked @action'):
            await mixed.helper()
        copy = pickle.loads(pickle.dumps(mixed))
        assert isinstance(copy, ProxyHandle)
        assert copy.agent.value == 2
        assert copy.agent_id != mixed.agent_id
        await proxy.shutdown()
        with pytest.raises(AgentTerminatedError):
            await proxy.get()

    asyncio.run(main())


class Child(Agent):
    @action
    async def echo(self, item: str) -> str:
        return item


class Parent(Agent):
    @action
    async def spawn(self) -> Any:
        return await self.agent_launch_alongside(Child)


def test_agent_launch_alongside_returns_a_usable_handle() -> None:
    async def main() -> None:
        async with await Manager.from_exchange_factory(LocalExchangeFactory()) as manager:
            parent = await manager.launch(Parent)
            child = await parent.spawn()
            assert await child.echo('hi') == 'hi'

    asyncio.run(main())


def test_definition_and_runtime_errors() -> None:
    with pytest.raises(BehaviorDefinitionError, match='Signature of loop method "run"'):

        class BadLoop(Agent):
            @loop
            async def run(self) -> None: ...

    with pytest.raises(AgentNotInitializedError):
        _ = Counter().agent_id
    assert issubclass(AgentNotInitializedError, AgentError)


def test_context_parameter_must_be_a_keyword() -> None:
    with pytest.raises(BehaviorDefinitionError, match='"context" argument'):

        class PositionalOnly(Agent):
            @action(context=True)
            async def f(self, context: Any, /) -> None: ...


def test_behavior_repr_and_str_name_the_type() -> None:
    assert repr(Counter()) == 'Counter()'
    assert str(Counter()) == 'Agent<Counter>'


def test_user_client_sets_the_handle_context() -> None:
    async def main() -> None:
        factory = LocalExchangeFactory()
        client = await factory.create_user_client()
        registration = await client.register_agent(Counter)
        handle: Handle[Counter] = Handle(registration.agent_id)
        with pytest.raises(ExchangeClientNotFoundError):  # made, not entered: no context
            _ = handle.exchange
        async with client:
            assert handle.exchange is client  # the client, as academy-py's handles
        with pytest.raises(ExchangeClientNotFoundError):
            _ = handle.exchange

    asyncio.run(main())


class PingAction(Agent):
    @action(allow_protected_name=True)
    async def ping(self) -> str:
        return 'pong'


def test_reserved_action_name_allowed_on_request() -> None:
    with SyncManager(ThreadExchange()) as manager:
        handle = manager.launch(PingAction())
        assert handle.action('ping').result(timeout=30) == 'pong'
        assert handle.ping(timeout=30) > 0  # the handle's own ping still works


def test_the_base_class_cannot_be_instantiated() -> None:
    with pytest.raises(TypeError, match='cannot be instantiated directly'):
        Agent()


def test_shutdown_without_terminating_keeps_the_mailbox() -> None:
    async def main() -> None:
        async with await Manager.from_exchange_factory(LocalExchangeFactory()) as manager:
            kept = await manager.launch(Counter)
            ended = await manager.launch(Counter)
            await manager.shutdown(kept, terminate=False, timeout=30)
            await ended.shutdown()
            await manager.wait([ended], timeout=30)
            client = manager.exchange_client
            assert await client.status(kept.agent_id) is MailboxStatus.ACTIVE
            assert await client.status(ended.agent_id) is MailboxStatus.TERMINATED

    asyncio.run(main())


def test_unknown_action_is_an_attribute_error() -> None:
    with SyncManager(ThreadExchange()) as manager:
        handle = manager.launch(Counter())
        with pytest.raises(AttributeError, match="no action 'missing'") as info:
            handle.missing().result(timeout=30)
        assert isinstance(info.value, UnknownActionError)
        assert isinstance(info.value, MessageRejectedError)


class Gated(Behavior):
    max_concurrency = 1

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    @action
    def hold(self) -> None:
        self.entered.set()
        self.release.wait(30)

    @action
    async def ask(self, other: Any) -> int:
        return int(await other.get())


def test_agent_stats_counts_requests() -> None:
    behavior = Gated()

    async def main() -> None:
        async with await Manager.from_exchange_factory(LocalExchangeFactory()) as manager:
            counter = await manager.launch(Counter, args=(1,))
            gated = await manager.launch(behavior)
            client = manager.exchange_client
            first = gated.hold()
            await asyncio.to_thread(behavior.entered.wait, 30)
            second = gated.ask(counter)  # waits for the slot
            stats = await client.agent_stats(gated.agent_id, timeout=30)
            assert (stats.in_progress, stats.completed) == (1, 0)
            assert stats.incoming == stats.in_progress + stats.queued + stats.completed
            behavior.release.set()
            await first
            assert await second == 1
            # an action counts as completed once its slot is freed, just after its
            # reply is sent: ask again until the agent has freed the second slot
            for _ in range(10_000):
                stats = await client.agent_stats(gated.agent_id, timeout=30)
                if stats.completed == 2:
                    break
            assert stats == AgentStats(
                incoming=2, outgoing=1, completed=2, in_progress=0, queued=0
            )

    asyncio.run(main())
