"""Manager: one exchange and one or more launchers behind a single interface.

``launch`` registers the agent's mailbox and starts it with a launcher, returning a
handle at once (messages sent before the agent runs wait in its mailbox); ``shutdown``
stops an agent; ``wait`` waits for agents to stop; leaving the ``with`` block shuts down
every agent the manager launched (except those of a detached launcher: daemons).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from tether._closing import ClosingContext
from tether.agents._context import AgentSpec, set_child_manager_factory
from tether.agents.behavior import Behavior, mro_of
from tether.agents.exchange import Exchange, MailboxStatus
from tether.agents.handle import Handle
from tether.agents.launcher import Launcher, ThreadLauncher
from tether.exceptions import (
    AgentConfigError,
    AgentError,
    AgentLaunchError,
    MailboxClosedError,
    TetherError,
    UnknownMailboxError,
)

__all__ = ['Manager']

logger = logging.getLogger(__name__)

B = TypeVar('B', bound=Behavior)


class Manager(ClosingContext):
    """Launch, use and shut down agents over one exchange.

    Args:
        exchange: The exchange every agent of this manager registers with.
        launcher: The default launcher (default: a :class:`ThreadLauncher`).
        launchers: More launchers, by name (``launch(..., launcher='name')``).
        default_launcher: Name of the default launcher among ``launchers``.
    """

    def __init__(
        self,
        exchange: Exchange,
        launcher: Launcher | None = None,
        *,
        launchers: Mapping[str, Launcher] | None = None,
        default_launcher: str | None = None,
    ) -> None:
        if not isinstance(exchange, Exchange):
            raise AgentConfigError(
                f'Manager needs an exchange (tether.agents.exchange: ThreadExchange, '
                f'RedisExchange or HybridExchange), got {_type_name(exchange)}',
            )
        _check_launcher(launcher, 'launcher')
        for name, value in (launchers or {}).items():
            _check_launcher(value, f'launchers[{name!r}]')
        self.exchange = exchange
        self.launchers: dict[str, Launcher] = dict(launchers or {})
        if launcher is not None:
            self.launchers.setdefault('default', launcher)
            self.default_launcher = launcher
        elif default_launcher is not None:
            self.default_launcher = self.launchers[default_launcher]
        elif self.launchers:
            self.default_launcher = next(iter(self.launchers.values()))
        else:
            self.default_launcher = ThreadLauncher()
            self.launchers['default'] = self.default_launcher
        self._launched: dict[str, Launcher] = {}
        self._behaviors: dict[str, type[Behavior]] = {}
        self.closed = False

    def __repr__(self) -> str:
        return f'Manager({self.exchange!r}, {len(self._launched)} agents)'

    # Launching --------------------------------------------------------------------------

    def _launcher(self, launcher: Launcher | str | None) -> Launcher:
        if launcher is None:
            return self.default_launcher
        if isinstance(launcher, str):
            try:
                return self.launchers[launcher]
            except KeyError:
                raise AgentLaunchError(
                    f'no launcher named {launcher!r}; known: {sorted(self.launchers)}',
                ) from None
        _check_launcher(launcher, 'launch(launcher=...)')
        return launcher

    def launch(
        self,
        behavior: B | type[B],
        *,
        args: Iterable[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        launcher: Launcher | str | None = None,
        agent_id: str | None = None,
        max_concurrency: int | None = None,
        state_dir: str | None = None,
    ) -> Handle[B]:
        """Start an agent running ``behavior`` and return a handle to it.

        Args:
            behavior: A behavior object, or a behavior class (built with ``args`` and
                ``kwargs``, as academy-py 1.0 allows).
            launcher: The launcher (or its name); default: the manager's.
            agent_id: Reuse an existing agent id (its mailbox and queued messages), for
                example to restart an agent that was shut down on another launcher.
            max_concurrency: Overrides the behavior's ``max_concurrency``.
            state_dir: Directory of the agent's persistent state.
        """
        if self.closed:
            raise AgentError('this manager is closed')
        if isinstance(behavior, type):
            behavior = behavior(*args, **(kwargs or {}))
        if not isinstance(behavior, Behavior):
            raise AgentConfigError(
                f'launch needs a Behavior (or a Behavior class), got {_type_name(behavior)}'
            )
        chosen = self._launcher(launcher)
        agent_id = self.exchange.register_agent(type(behavior), agent_id)
        spec = AgentSpec(
            behavior=behavior,
            agent_id=agent_id,
            exchange=self.exchange,
            max_concurrency=max_concurrency,
            state_dir=state_dir,
        )
        chosen.launch(spec)
        self._launched[agent_id] = chosen
        self._behaviors[agent_id] = type(behavior)
        return Handle(agent_id, self.exchange)

    def get_handle(self, agent_id: str) -> Handle[Any]:
        """A handle to any agent of the exchange."""
        return Handle(agent_id, self.exchange)

    # Stopping ---------------------------------------------------------------------------

    @staticmethod
    def _id(agent: str | Handle[Any]) -> str:
        return agent.agent_id if isinstance(agent, Handle) else agent

    def shutdown(
        self,
        agent: str | Handle[Any],
        *,
        blocking: bool = True,
        timeout: float | None = None,
    ) -> None:
        """Shut an agent down for good (a second call is harmless).

        Args:
            agent: Its id or handle.
            blocking: Wait until it has stopped.
            timeout: Longest wait, in seconds.

        Raises:
            TimeoutError: if ``blocking`` and the agent did not stop in time.
            UnknownMailboxError: at once, if the agent has no mailbox to be asked through
                (see :meth:`_ask_to_stop`).
            AgentError: if the exchange cannot be reached.
        """
        agent_id = self._id(agent)
        self._ask_to_stop(agent_id)
        if blocking:
            self.wait([agent_id], timeout=timeout)

    def _ask_to_stop(self, agent_id: str) -> None:
        """Send the agent a shutdown request, through its mailbox.

        A mailbox the exchange lost (Redis restarted without its data) is made again when
        the agent runs on one of this manager's launchers: the agent still listens on it
        (and registers it again itself once it notices), so the request reaches it.
        Otherwise nobody can reach the agent, and this says so at once instead of
        waiting for it to stop.
        """
        status = self.exchange.status(agent_id)
        if status is MailboxStatus.TERMINATED:
            return  # it stops (or stopped) for good already
        if status is MailboxStatus.MISSING:
            launcher = self._launched.get(agent_id)
            behavior = self._behaviors.get(agent_id)
            if launcher is not None and agent_id not in launcher.running():
                return  # stopped: nothing to ask
            if launcher is None or behavior is None:
                raise UnknownMailboxError(
                    f'agent {agent_id} has no mailbox in {self.exchange!r}, so it cannot be '
                    'asked to stop: it was never registered there, or the exchange lost its '
                    'data (Redis restarted without persistence) and the agent, which this '
                    'manager did not launch, has not registered it again (a running agent '
                    'does so within seconds; try again, or stop it where it was launched)',
                )
            self.exchange.transport().restore(agent_id, mro_of(behavior))
        with contextlib.suppress(MailboxClosedError):  # terminated meanwhile
            self.exchange.get_handle(agent_id).shutdown()

    def wait(
        self,
        agents: str | Handle[Any] | Iterable[str | Handle[Any]] | None = None,
        *,
        timeout: float | None = None,
    ) -> None:
        """Wait until these agents (default: all of this manager's) have stopped.

        Raises:
            TimeoutError: if an agent is still running after ``timeout`` seconds.
        """
        if agents is None:
            ids = list(self._launched)
        elif isinstance(agents, str | Handle):
            ids = [self._id(agents)]
        else:
            ids = [self._id(a) for a in agents]  # type: ignore[union-attr]
        for agent_id in ids:
            launcher = self._launched.get(agent_id)
            if launcher is None:
                raise AgentError(f'agent {agent_id} was not launched by this manager')
            if not launcher.wait(agent_id, timeout):
                raise TimeoutError(f'agent {agent_id} still runs after {timeout} s')

    def running(self) -> list[str]:
        """Ids of this manager's agents that are still running."""
        return [a for a, launcher in self._launched.items() if a in launcher.running()]

    def close(self) -> None:
        """Shut down every agent launched here (not daemons) and close the launchers."""
        if self.closed:
            return
        self.closed = True
        for agent_id, launcher in list(self._launched.items()):
            if launcher.detached or agent_id not in launcher.running():
                continue
            try:
                self._ask_to_stop(agent_id)
            except TetherError as e:
                logger.warning('could not ask agent %s to stop: %s', agent_id, e)
        for launcher in {id(x): x for x in self.launchers.values()}.values():
            if not launcher.detached:
                launcher.close()


def _type_name(value: object) -> str:
    cls = type(value)
    return f'{cls.__module__}.{cls.__qualname__}'


def _check_launcher(value: object, where: str) -> None:
    if value is None or isinstance(value, Launcher):
        return
    hint = ''
    if hasattr(value, 'submit') and hasattr(value, 'shutdown'):
        hint = (
            ' (an executor: where academy-py takes an executor, tether takes a launcher, '
            'which also supervises and restarts its agents; e.g. Manager(exchange, '
            'ThreadLauncher()))'
        )
    raise AgentConfigError(
        f'Manager {where} must be a launcher (tether.agents.launcher: ThreadLauncher, '
        f'ProcessLauncher, ParslLauncher or DaemonLauncher), got {_type_name(value)}{hint}',
    )


def _child_manager(exchange: Exchange) -> Manager:
    """The manager of an agent's children: their threads run in the agent's process."""
    return Manager(exchange, ThreadLauncher())


set_child_manager_factory(_child_manager)
