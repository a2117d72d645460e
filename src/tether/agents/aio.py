"""academy-py 1.0's asynchronous ``Manager``, over tether's manager and launchers.

The seed programs use :class:`tether.agents.Manager` (synchronous, with launchers); a
program written for academy-py 1.0 imports this one instead and keeps its ``async with``
and ``await manager.launch(...)``:

```python
import asyncio
from concurrent.futures import ThreadPoolExecutor

from tether.agents import Agent, action
from tether.agents.aio import Manager
from tether.agents.exchange import LocalExchangeFactory


class Echo(Agent):
    @action
    async def echo(self, text: str) -> str:
        return text


async def main() -> None:
    async with await Manager.from_exchange_factory(
        LocalExchangeFactory(), executors=ThreadPoolExecutor()
    ) as manager:
        handle = await manager.launch(Echo)
        assert await handle.echo('hi') == 'hi'


asyncio.run(main())
```

Executors become launchers: ``None`` (academy-py's ``'event_loop'``) runs the agent in a
thread of this process with an event loop of its own (a :class:`ThreadLauncher`), and a
``concurrent.futures.Executor`` runs it as one of the executor's tasks (an
:class:`ExecutorLauncher`); ``max_retries`` is the launchers' restart limit. A tether
launcher may be given wherever an executor is.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import warnings
from collections.abc import Iterable, Mapping
from concurrent.futures import Executor
from typing import Any, Self, TypeVar

from tether.agents.behavior import Behavior
from tether.agents.exceptions import AlreadyLaunchedError, LaunchBatchClosedError
from tether.agents.exchange.factory import (
    AgentRegistration,
    ExchangeFactory,
    UserExchangeClient,
    _InExchangeContext,
)
from tether.agents.handle import Handle
from tether.agents.identifier import AgentId, UserId
from tether.agents.launcher import ExecutorLauncher, Launcher, RestartPolicy, ThreadLauncher
from tether.agents.manager import Manager as SyncManager
from tether.exceptions import AgentLaunchError, InvalidArgumentError, UnknownMailboxError

__all__ = ['LaunchBatch', 'Manager', 'recommended_logging']

B = TypeVar('B', bound=Behavior)


def recommended_logging(level: int = logging.INFO) -> Any:
    """academy-py's ``recommended_logging()``: log to the console at ``level``.

    Configures the root logger only if the program has not (:func:`logging.basicConfig`);
    returns ``None``, which :class:`Manager` takes as its ``log_config``.
    """
    logging.basicConfig(level=level, format='%(asctime)s %(levelname)s %(name)s: %(message)s')
    return None


def _launchers(
    executors: Any, default_executor: str, restart: RestartPolicy
) -> tuple[dict[str, Launcher], list[Executor], str]:
    table: dict[str, Any] = {'event_loop': None}
    if isinstance(executors, Executor | Launcher):
        table['default'] = executors
        default_executor = 'default'
    elif isinstance(executors, Mapping):
        table.update(executors)
    elif executors is not None:
        raise InvalidArgumentError(
            f'Invalid executors parameter: {executors!r:.80} (an Executor, a launcher, a '
            'mapping of names to them, or None)'
        )
    if default_executor not in table:
        raise InvalidArgumentError(
            f'No executor named "{default_executor}" was provided to use as the default '
            f'(known: {sorted(table)})'
        )
    launchers: dict[str, Launcher] = {}
    owned: list[Executor] = []
    for name, value in table.items():
        if value is None:
            launchers[name] = ThreadLauncher(restart=restart)
        elif isinstance(value, Launcher):
            launchers[name] = value
        elif isinstance(value, Executor):
            launchers[name] = ExecutorLauncher(value, restart=restart)
            owned.append(value)
        else:
            raise InvalidArgumentError(
                f'Invalid executors parameter: executors[{name!r}] is {value!r:.80}'
            )
    return launchers, owned, default_executor


def _own_error(error: BaseException | None) -> BaseException | None:
    """What an agent's own code raised (not the launcher's AgentLaunchError around it)."""
    if isinstance(error, AgentLaunchError) and error.__cause__ is not None:
        return error.__cause__
    return error


class Manager(_InExchangeContext):
    """Launch, use and shut down agents from ``async`` code (academy-py 1.0's manager).

    Inside ``async with``, ``Handle(agent_id)`` (without an exchange) uses this
    manager's exchange. The manager owns its exchange client and the executors it is
    given: closing it (or leaving ``async with``) shuts its agents down, then the
    executors, then the client.

    Args:
        exchange_client: From ``await factory.create_user_client()``.
        executors: An executor (or launcher), a mapping of names to them (``None``: a
            thread of this process), or ``None``.
        default_executor: The name used when ``launch`` names none.
        max_retries: How often a failed agent is started again.
        log_config: Accepted for academy-py's signature (``None``, what
            :func:`recommended_logging` returns); tether logs through :mod:`logging`.

    Raises:
        InvalidArgumentError: (a ``ValueError``) for executors of another type, or a
            default that is not among them.
    """

    def __init__(
        self,
        exchange_client: UserExchangeClient,
        executors: Executor | Launcher | Mapping[str, Executor | Launcher | None] | None = None,
        *,
        default_executor: str = 'event_loop',
        max_retries: int = 0,
        log_config: None = None,
    ) -> None:
        del log_config
        if not isinstance(exchange_client, UserExchangeClient):
            raise InvalidArgumentError(
                'Manager needs a UserExchangeClient (await factory.create_user_client()), '
                f'got {type(exchange_client).__name__}; tether.agents.Manager takes an exchange'
            )
        restart = RestartPolicy(max_restarts=max_retries, backoff=0.1)
        launchers, self._executors, default = _launchers(executors, default_executor, restart)
        self._client = exchange_client
        self._manager = SyncManager(
            exchange_client.exchange, launchers=launchers, default_launcher=default
        )
        self._handles: dict[str, Handle[Any]] = {}

    @classmethod
    async def from_exchange_factory(
        cls,
        factory: ExchangeFactory,
        executors: Executor | Launcher | Mapping[str, Executor | Launcher | None] | None = None,
        *,
        default_executor: str = 'event_loop',
        max_retries: int = 0,
        log_config: None = None,
    ) -> Self:
        """A manager with a new user client of ``factory``'s exchange."""
        del log_config
        client = await factory.create_user_client()
        try:
            return cls(
                client, executors, default_executor=default_executor, max_retries=max_retries
            )
        except BaseException:
            await client.close()
            raise

    @property
    def exchange_client(self) -> UserExchangeClient:
        """The user client this manager owns."""
        return self._client

    @property
    def exchange_factory(self) -> ExchangeFactory:
        """The factory of the exchange client."""
        return self._client.factory()

    @property
    def user_id(self) -> UserId:
        """The id of this manager's user client."""
        return self._client.client_id

    @property
    def sync(self) -> SyncManager:
        """The synchronous :class:`tether.agents.Manager` underneath."""
        return self._manager

    def __repr__(self) -> str:
        return f'Manager(exchange={self._client!r}, launchers={sorted(self._manager.launchers)})'

    def __str__(self) -> str:
        return f'Manager<{self.user_id}, {self._client.exchange!r}>'

    def _context_value(self) -> UserExchangeClient:
        # Handle(agent_id) inside `async with` this manager uses its client (academy-py).
        return self._client

    async def close(self, close_exchange: bool = True) -> None:
        """Shut down every agent launched here, the executors, and (by default) the
        exchange client.

        Raises:
            Exception: once all is closed, what the first agent that failed for good
                failed with (as academy-py's manager does).
        """
        await asyncio.to_thread(self._manager.close)
        for executor in self._executors:
            await asyncio.to_thread(executor.shutdown, True)
        self._executors = []
        if close_exchange:
            await self._client.close()
        for agent_id, launcher in self._manager._launched.items():
            error = _own_error(launcher.failure(agent_id))
            if error is not None:
                raise error

    def add_executor(self, name: str, executor: Executor | Launcher | None) -> Self:
        """Add an executor (or launcher; ``None``: a thread of this process) by name.

        Raises:
            InvalidArgumentError: (a ``ValueError``) if the name is taken.
        """
        if name in self._manager.launchers:
            raise InvalidArgumentError(f'Executor named "{name}" already exists.')
        restart = self._manager.default_launcher.restart
        launchers, owned, _ = _launchers({name: executor}, name, restart)
        self._manager.launchers[name] = launchers[name]
        self._executors.extend(owned)
        return self

    def set_default_executor(self, name: str | None) -> Self:
        """Make the executor called ``name`` the default of ``launch``.

        Raises:
            InvalidArgumentError: (a ``ValueError``) if there is no executor of that name.
        """
        key = 'event_loop' if name is None else name
        if key not in self._manager.launchers:
            raise InvalidArgumentError(f'An executor named "{name}" does not exist.')
        self._manager.default_launcher = self._manager.launchers[key]
        return self

    # Launching ----------------------------------------------------------------------------

    async def register_agent(
        self, agent: type[Behavior], *, name: str | None = None
    ) -> AgentRegistration[Any]:
        """Make the mailbox of a future agent (pass it to ``launch(registration=)``)."""
        return await self._client.register_agent(agent, name=name)

    async def register_agents(
        self, agents: list[tuple[type[Behavior], str | None]]
    ) -> list[AgentRegistration[Any]]:
        """Register several agents (``(type, name)`` pairs), in order."""
        return await self._client.register_agents(agents)

    async def launch(
        self,
        agent: B | type[B],
        *,
        args: Iterable[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        executor: str | None = None,
        name: str | None = None,
        registration: AgentRegistration[Any] | None = None,
        submit_kwargs: Mapping[str, Any] | None = None,
        **ignored: Any,
    ) -> Handle[B]:
        """Start an agent (an instance, or a class built with ``args`` and ``kwargs``).

        Args:
            executor: The name of the executor (launcher) to run it with.
            name: A readable name for a new agent's id.
            registration: Launch an agent registered before (its mailbox is kept).
            submit_kwargs: Keyword arguments of the executor's ``submit`` (a Parsl
                resource specification ...); ignored by launchers that are not executors.
            ignored: academy-py's ``config`` and ``log_config`` are accepted and have no
                effect (see the porting guide).

        Warns:
            RuntimeWarning: the executor runs more agents than it has workers (the
                later ones wait for a worker).

        Raises:
            AlreadyLaunchedError: (a ``RuntimeError``) ``registration`` names an agent
                this manager launched already.
        """
        del ignored
        chosen = self._manager._launcher(executor)
        if registration is not None:
            agent_id = registration.agent_id
            if agent_id in self._manager._launched:
                raise AlreadyLaunchedError(f'{agent_id} has already been executed.')
        else:
            agent_id = AgentId[Any].new(name)
        start = functools.partial(
            self._manager.launch,
            agent,
            args=args or (),
            kwargs=kwargs,
            launcher=executor,
            agent_id=agent_id,
        )
        if isinstance(chosen, ExecutorLauncher) and submit_kwargs:
            chosen.submit_kwargs[agent_id] = dict(submit_kwargs)
        launched: Handle[B] = await asyncio.to_thread(start)
        if isinstance(chosen, ExecutorLauncher):
            workers = chosen.max_workers()
            if workers is not None and len(chosen.running()) > workers:
                warnings.warn(
                    f'Executor overload: {len(chosen.running())} agents run on '
                    f'{chosen.executor!r}, which has {workers} workers; agent {agent_id} '
                    'waits for one to stop',
                    RuntimeWarning,
                    stacklevel=2,
                )
        handle: Handle[B] = self._handles.setdefault(agent_id, launched)
        return handle

    def launch_batch(self) -> LaunchBatch:
        """Queue several launches and start them together when the ``async with`` block
        ends (handles returned inside the block may be passed to later launches)."""
        return LaunchBatch(self)

    def get_handle(self, agent: str | AgentRegistration[Any]) -> Handle[Any]:
        """A handle to an agent of this manager's exchange."""
        agent_id = agent.agent_id if isinstance(agent, AgentRegistration) else agent
        handle = self._handles.get(agent_id)
        if handle is None:
            handle = self._client.get_handle(agent_id)
            self._handles[agent_id] = handle
        return handle

    # Stopping -----------------------------------------------------------------------------

    def running(self) -> set[AgentId[Any]]:
        """Ids of this manager's agents that have not stopped."""
        return {AgentId[Any](a) for a in self._manager.running()}

    def _launcher_of(self, agent: str | Handle[Any]) -> tuple[str, Launcher]:
        agent_id = agent.agent_id if isinstance(agent, Handle) else agent
        launcher = self._manager._launched.get(agent_id)
        if launcher is None:
            raise UnknownMailboxError(f'agent {agent_id} was not launched by this manager')
        return agent_id, launcher

    async def shutdown(
        self,
        agent: str | Handle[Any],
        *,
        blocking: bool = True,
        raise_error: bool = True,
        terminate: bool | None = None,
        timeout: float | None = None,
    ) -> None:
        """Shut down an agent this manager launched (harmless if it stopped already).

        ``terminate=False`` stops it and keeps its mailbox (messages wait there).

        Raises:
            UnknownMailboxError: (``BadEntityIdError``) for an agent launched elsewhere.
            TimeoutError: ``blocking`` and it did not stop within ``timeout`` seconds.
        """
        agent_id, launcher = self._launcher_of(agent)
        if agent_id not in launcher.running():
            return
        if terminate is False:  # stop, keep the mailbox
            await self.get_handle(agent_id).shutdown(terminate=False)
        else:
            await asyncio.to_thread(self._manager.shutdown, agent_id, blocking=False)
        if blocking:
            await self.wait([agent_id], raise_error=raise_error, timeout=timeout)

    async def wait(
        self,
        agents: Iterable[str | Handle[Any]],
        *,
        raise_error: bool = False,
        return_when: str = asyncio.ALL_COMPLETED,
        timeout: float | None = None,
    ) -> None:
        """Wait for agents this manager launched to stop (as :func:`asyncio.wait`).

        Raises:
            UnknownMailboxError: (``BadEntityIdError``) for an agent launched elsewhere.
            TimeoutError: if the condition was not met within ``timeout`` seconds.
            Exception: with ``raise_error``, what a stopped agent failed with.
        """
        launched = [self._launcher_of(a) for a in agents]
        if not launched:
            return
        tasks = {
            asyncio.ensure_future(asyncio.to_thread(launcher.wait, agent_id, timeout)): (
                agent_id,
                launcher,
            )
            for agent_id, launcher in launched
        }
        done, pending = await asyncio.wait(tasks, return_when=return_when)
        for task in pending:
            task.cancel()
        stopped = [tasks[t] for t in done if t.result()]
        if return_when == asyncio.ALL_COMPLETED and len(stopped) < len(tasks):
            raise TimeoutError(f'agents still run after {timeout} s')
        if not stopped:
            raise TimeoutError(f'no agent stopped within {timeout} s')
        if raise_error:
            for agent_id, launcher in stopped:
                error = _own_error(launcher.failure(agent_id))
                if error is not None:
                    raise error


class LaunchBatch:
    """Launches queued in an ``async with manager.launch_batch() as batch:`` block,
    started together when the block ends (none if it raised)."""

    def __init__(self, manager: Manager) -> None:
        self._manager = manager
        self._queued: list[tuple[Any, AgentRegistration[Any], dict[str, Any]]] = []
        self.closed = False

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        if exc_type is None:
            await self.submit()
        self.closed = True

    def _check(self) -> None:
        if self.closed:
            raise LaunchBatchClosedError('this launch batch is closed')

    async def queue(
        self,
        agent: B | type[B],
        *,
        name: str | None = None,
        **launch_kwargs: Any,
    ) -> Handle[B]:
        """Register an agent now and launch it when the block ends; returns its handle."""
        self._check()
        agent_type = agent if isinstance(agent, type) else type(agent)
        registration = await self._manager.register_agent(agent_type, name=name)
        self._queued.append((agent, registration, launch_kwargs))
        return self._manager.get_handle(registration)

    async def submit(self) -> None:
        """Launch what was queued (called when the block ends)."""
        self._check()
        queued, self._queued = self._queued, []
        for agent, registration, kwargs in queued:
            await self._manager.launch(agent, registration=registration, **kwargs)
        self.closed = True
