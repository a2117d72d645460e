"""academy-py 1.0's exchange factories and user clients, over tether's exchanges.

A factory names an exchange (``LocalExchangeFactory()`` is a
:class:`~tether.agents.exchange.ThreadExchange`, ``RedisExchangeFactory(host, port)`` a
:class:`~tether.agents.exchange.RedisExchange`, ``HybridExchangeFactory(host, port)`` a
:class:`~tether.agents.exchange.HybridExchange`); ``await factory.create_user_client()``
gives a :class:`UserExchangeClient`, which :class:`tether.agents.aio.Manager` takes.

```python
import asyncio

from tether.agents.exchange import LocalExchangeFactory


async def main() -> None:
    async with await LocalExchangeFactory().create_user_client() as client:
        assert client.client_id.role == 'user'


asyncio.run(main())
```
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import contextvars
import dataclasses
import uuid
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar

from tether.agents.exceptions import ExchangeNotPicklableError
from tether.agents.exchange._base import Exchange, MailboxStatus
from tether.agents.exchange.hybrid import HybridExchange
from tether.agents.exchange.redis import RedisExchange
from tether.agents.exchange.thread import ThreadExchange
from tether.agents.handle import exchange_context
from tether.agents.identifier import AgentId, UserId, entity_id
from tether.exceptions import InvalidArgumentError, UnknownMailboxError

if TYPE_CHECKING:
    from tether.agents.behavior import Behavior
    from tether.agents.handle import Handle

__all__ = [
    'AgentRegistration',
    'AgentStats',
    'ExchangeFactory',
    'HybridExchangeFactory',
    'LocalExchangeFactory',
    'RedisExchangeFactory',
    'UserExchangeClient',
]

A = TypeVar('A')


@dataclasses.dataclass(frozen=True)
class AgentRegistration(Generic[A]):
    """What registering an agent returns: its id (pass it to ``launch(registration=)``).

    Attributes:
        agent_id: The id of the agent's new mailbox.
    """

    agent_id: AgentId[A]


@dataclasses.dataclass
class AgentStats:
    """An agent's request counts since it started (academy-py's ``AgentStats``).

    Attributes:
        incoming: Requests it accepted (completed + in progress + queued).
        outgoing: Requests its actions sent to other agents through handles.
        completed: Requests it answered.
        in_progress: Requests running now.
        queued: Requests waiting for a free slot (``max_concurrency``).
    """

    incoming: int = 0
    outgoing: int = 0
    completed: int = 0
    in_progress: int = 0
    queued: int = 0


class ExchangeFactory(abc.ABC):
    """Names one exchange; makes user clients of it (academy-py 1.0's factory).

    A factory pickles as the settings of its exchange (never a connection), so it can be
    shipped to the processes where agents run, as academy-py's can.
    """

    @abc.abstractmethod
    def exchange(self) -> Exchange:
        """The tether exchange this factory names."""

    async def create_user_client(
        self, *, name: str | None = None, start_listener: bool = True
    ) -> UserExchangeClient:
        """A new client of the exchange, with a user id of its own.

        Args:
            name: A human-readable name for the client's id.
            start_listener: Accepted for academy-py's signature: tether's handles share
                one listener per process, started on their first request.
        """
        del start_listener
        exchange = self.exchange()
        client_id = await asyncio.to_thread(exchange.register_client)
        return UserExchangeClient(self, exchange, UserId(client_id, name))

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self.exchange()!r})'


class LocalExchangeFactory(ExchangeFactory):
    """An exchange in this process's memory: a :class:`ThreadExchange` (agents run in
    threads of this process)."""

    def __init__(self) -> None:
        self._exchange = ThreadExchange()

    def exchange(self) -> Exchange:
        return self._exchange

    def __reduce__(self) -> Any:
        raise ExchangeNotPicklableError(
            'a LocalExchangeFactory cannot be pickled: its exchange lives in this '
            "process's memory (use RedisExchangeFactory or HybridExchangeFactory to reach "
            'agents in other processes)'
        )


class RedisExchangeFactory(ExchangeFactory):
    """Mailboxes in Redis: a :class:`RedisExchange`.

    Args:
        hostname: Redis host.
        port: Redis port.
        redis_kwargs: Keyword arguments of :class:`RedisExchange` (``prefix``, ``db``,
            ``password`` ...); redis-py's other keywords are refused.
    """

    def __init__(self, hostname: str, port: int, **redis_kwargs: Any) -> None:
        self._exchange = RedisExchange(hostname, port, **redis_kwargs)

    def exchange(self) -> Exchange:
        return self._exchange


class HybridExchangeFactory(ExchangeFactory):
    """Direct connections between processes, Redis for discovery and as the fallback: a
    :class:`HybridExchange`.

    Args:
        redis_host: Redis host.
        redis_port: Redis port.
        redis_kwargs: Keyword arguments of :class:`HybridExchange` (``db``,
            ``password`` ...).
        interface: Accepted for academy-py's signature (tether's hybrid exchange picks
            the address peers reach it at itself).
        namespace: Key namespace in Redis (``None``: a random one, so nothing is shared).
        ports: Accepted for academy-py's signature (one server per process).
    """

    def __init__(
        self,
        redis_host: str,
        redis_port: int,
        *,
        redis_kwargs: dict[str, Any] | None = None,
        interface: str | None = None,
        namespace: str | None = 'default',
        ports: Any = None,
    ) -> None:
        del interface, ports
        if namespace is None:
            namespace = uuid.uuid4().hex[:12]
        prefix = 'tether-agents:' if namespace == 'default' else f'tether-agents:{namespace}:'
        kwargs = {'prefix': prefix, **(redis_kwargs or {})}
        self._exchange = HybridExchange(redis_host, redis_port, **kwargs)

    def exchange(self) -> Exchange:
        return self._exchange


class _InExchangeContext:
    """``async with`` it sets :data:`exchange_context` to its :meth:`_context_value`;
    leaving resets it, then closes it (academy-py's manager and exchange client)."""

    _context_token: contextvars.Token[Any] | None = None

    def _context_value(self) -> Any:
        return self

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        self._context_token = exchange_context.set(self._context_value())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._leave_context()
        await self.close()

    def _leave_context(self) -> None:
        token, self._context_token = self._context_token, None
        if token is not None:
            with contextlib.suppress(ValueError):  # left in another context than entered
                exchange_context.reset(token)


class UserExchangeClient(_InExchangeContext):
    """A user's client of an exchange (academy-py 1.0's): registers, finds and ends
    agents; :class:`tether.agents.aio.Manager` is built on one.

    Attributes:
        client_id: This client's id (its mailbox).
    """

    def __init__(self, factory: ExchangeFactory, exchange: Exchange, client_id: UserId) -> None:
        self._factory = factory
        self.exchange = exchange
        self.client_id = client_id
        self.closed = False

    def factory(self) -> ExchangeFactory:
        """The factory this client came from."""
        return self._factory

    async def close(self) -> None:
        """Terminate this client's own mailbox (agents keep running)."""
        if self.closed:
            return
        self.closed = True
        self._leave_context()
        await asyncio.to_thread(self.exchange.terminate, self.client_id)

    async def register_agent(
        self, agent: type[Behavior], *, name: str | None = None
    ) -> AgentRegistration[Any]:
        """Make the mailbox of a new agent of type ``agent`` (messages wait in it)."""
        agent_id = AgentId[Any].new(name)
        await asyncio.to_thread(self.exchange.register_agent, agent, agent_id)
        return AgentRegistration(agent_id)

    async def register_agents(
        self, agents: list[tuple[type[Behavior], str | None]]
    ) -> list[AgentRegistration[Any]]:
        """Register several agents (``(type, name)`` pairs), in order."""
        return [await self.register_agent(agent, name=name) for agent, name in agents]

    async def discover(
        self, agent: type[Behavior], *, allow_subclasses: bool = True
    ) -> tuple[AgentId[Any], ...]:
        """Ids of active agents of type ``agent`` (or, by default, of a subclass)."""
        found = await asyncio.to_thread(
            self.exchange.discover, agent, allow_subclasses=allow_subclasses
        )
        return tuple(AgentId[Any](a) for a in found)

    async def status(self, uid: str) -> MailboxStatus:
        """The state of a mailbox (``MISSING`` for one that never existed)."""
        return await asyncio.to_thread(self.exchange.status, uid)

    async def terminate(self, uid: str) -> None:
        """Close a mailbox for good.

        Raises:
            UnknownMailboxError: (``BadEntityIdError``) for a mailbox that never existed.
        """
        status = await self.status(uid)
        if status is MailboxStatus.MISSING:
            raise UnknownMailboxError(f'no mailbox {uid} in {self.exchange!r}')
        await asyncio.to_thread(self.exchange.terminate, uid)

    async def agent_stats(self, uid: str, *, timeout: float | None = None) -> AgentStats:
        """The request counts of a running agent (see :meth:`Exchange.agent_stats`)."""
        counts = await asyncio.to_thread(self.exchange.agent_stats, uid, timeout=timeout)
        return AgentStats(**counts)

    def get_handle(self, aid: str) -> Handle[Any]:
        """A handle to an agent of this exchange.

        Raises:
            InvalidArgumentError: for a user id (users have no actions).
        """
        ident = entity_id(aid)
        if isinstance(ident, UserId):
            raise InvalidArgumentError(f'{aid} is a user, not an agent: it has no handle')
        return self.exchange.get_handle(ident)

    def __repr__(self) -> str:
        return f'UserExchangeClient({self.client_id!r}, {self.exchange!r})'
