"""academy-py 1.0 behaviours matched in round 2 of issue 29: the strict Agent base,
agent_describe, ids printed as academy-py prints them, handles following the context."""

from __future__ import annotations

import asyncio
import pickle
import uuid
from typing import Any

import pytest

from tether.agents import Agent, AgentDescription, Behavior, action
from tether.agents.aio import Manager
from tether.agents.exceptions import ExchangeClientNotFoundError
from tether.agents.exchange import LocalExchangeFactory
from tether.agents.handle import Handle
from tether.agents.identifier import AgentId, UserId
from tether.exceptions import BehaviorDefinitionError, InvalidArgumentError


def test_agent_refuses_a_synchronous_action() -> None:
    with pytest.raises(BehaviorDefinitionError, match='"work" is not a coroutine') as info:

        class Strict(Agent):
            @action
            def work(self) -> int:
                return 1

    assert isinstance(info.value, TypeError)


@pytest.mark.parametrize('callback', ['agent_on_startup', 'agent_on_shutdown'])
def test_agent_refuses_a_synchronous_callback(callback: str) -> None:
    def sync(self: Any) -> None:
        pass

    with pytest.raises(TypeError, match=rf'"Strict.{callback}" is not a coroutine'):
        type('Strict', (Agent,), {callback: sync})


def test_behavior_still_takes_synchronous_actions_and_callbacks() -> None:
    class Loose(Behavior):
        def agent_on_startup(self) -> None:  # type: ignore[override]
            pass

        @action
        def work(self) -> int:
            return 1

    assert Loose().work() == 1
    assert 'agent_describe' not in Loose.behavior_actions()


class Described(Agent):
    """An agent with one action."""

    @action
    async def double(self, x: int) -> int:
        """Twice x."""
        return 2 * x

    async def helper(self) -> None:
        """Not an action."""


def test_agent_describe_on_a_running_agent() -> None:
    async def main() -> AgentDescription:
        async with await Manager.from_exchange_factory(LocalExchangeFactory()) as manager:
            handle = await manager.launch(Described)
            assert await handle.double(4) == 8
            return await handle.agent_describe()  # type: ignore[no-any-return]

    description = asyncio.run(main())
    assert description.description == 'An agent with one action.'
    assert sorted(description.actions) == ['agent_describe', 'double']
    assert description.actions['double'].doc == 'Twice x.'
    with pytest.raises(BehaviorDefinitionError):
        Agent()


def test_ids_print_as_academy_and_keep_the_mailbox_id() -> None:
    uid = uuid.uuid4()
    named = AgentId[Any](uid=uid, name='worker')
    plain = AgentId[Any](uid=uid)
    assert named == plain
    assert hash(named) == hash(plain)
    assert (str(named), str(plain)) == ('AgentId<worker>', f'AgentId<{uid.hex[:8]}>')
    assert named.mailbox_id == f'{named}' == f'agent-{uid.hex}'
    assert type(named.mailbox_id) is str
    assert AgentId[Any](named).mailbox_id == named.mailbox_id  # rebuilt from an id
    assert str(UserId.new('me')) == 'UserId<me>'
    again = pickle.loads(pickle.dumps(named))
    assert (again, again.name, str(again)) == (named, 'worker', 'AgentId<worker>')


def test_handle_ignore_context() -> None:
    async def main() -> None:
        factory = LocalExchangeFactory()
        with pytest.raises(InvalidArgumentError, match='no explicit exchange') as info:
            Handle('agent-1', ignore_context=True)
        assert isinstance(info.value, ValueError)
        client = await factory.create_user_client()
        registration = await client.register_agent(Described)
        pinned: Handle[Described] = Handle(
            registration.agent_id, exchange=client, ignore_context=True
        )
        assert pinned.exchange is client
        assert repr(client) in repr(pinned)
        async with await factory.create_user_client():
            assert pinned.exchange is client
        with pytest.raises(pickle.PicklingError, match='ignore_context'):
            pickle.dumps(pinned)
        bound: Handle[Described] = Handle(registration.agent_id, exchange=client)
        assert pickle.loads(pickle.dumps(bound)) == bound  # pickles as id and exchange
        await client.close()

    asyncio.run(main())


def test_unbound_handle_follows_the_context() -> None:
    async def main() -> None:
        factory = LocalExchangeFactory()
        async with await Manager.from_exchange_factory(factory) as manager:
            launched = await manager.launch(Described)
            handle: Handle[Described] = Handle(launched.agent_id)
            assert handle.exchange is manager.exchange_client
            assert await handle.double(5) == 10
        with pytest.raises(ExchangeClientNotFoundError):
            _ = handle.exchange

    asyncio.run(main())
