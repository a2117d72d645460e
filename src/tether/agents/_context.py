"""What a running agent's code sees: its spec, the context of its agent and of its action.

:class:`AgentSpec` is what a launcher ships to where an agent runs; a behavior reaches its
agent through :class:`AgentContext` (``behavior.agent_context``) and the request it serves
through :func:`current_action`.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tether._once import create_once
from tether.exceptions import AgentError

if TYPE_CHECKING:
    from tether.agents._runtime import AgentRuntime
    from tether.agents.behavior import Behavior
    from tether.agents.exchange import Exchange
    from tether.agents.handle import Handle
    from tether.agents.launcher import Launcher
    from tether.agents.manager import Manager
    from tether.agents.state import State

__all__ = [
    'ActionContext',
    'AgentContext',
    'AgentSpec',
    'LoopError',
    'current_action',
    'set_child_manager_factory',
]

_child_manager_factory: Callable[[Exchange], Manager] | None = None


def set_child_manager_factory(factory: Callable[[Exchange], Manager]) -> None:
    """How :meth:`AgentContext.launch` makes the manager of an agent's children.

    Set by :mod:`tether.agents.manager` when it is imported (the runtime sits below the
    manager and its launchers, which run it, so it does not import them).
    """
    global _child_manager_factory
    _child_manager_factory = factory


_current: contextvars.ContextVar[ActionContext | None] = contextvars.ContextVar(
    'tether_agents_action', default=None
)
_event_lock = threading.Lock()


class LoopError(AgentError):
    """A control loop raised, and the behavior shuts down on loop errors."""


@dataclasses.dataclass
class AgentSpec:
    """Everything needed to run one agent (what a launcher ships to where it runs).

    Attributes:
        behavior: The behavior object.
        agent_id: The agent's mailbox id (registered in ``exchange``).
        exchange: The exchange.
        max_concurrency: Overrides the behavior's ``max_concurrency``.
        state_dir: Directory of the agent's persistent state (default: the agents home).
        journal: File of the in-flight journal (set by launchers that run agents in
            processes of their own; see :mod:`tether.agents._journal`).
    """

    behavior: Behavior
    agent_id: str
    exchange: Exchange
    max_concurrency: int | None = None
    state_dir: str | None = None
    journal: str | None = None


class ActionContext:
    """What a running action can learn about its request (see :func:`current_action`).

    Attributes:
        action: The action's name.
        caller: The mailbox id of the caller.
        tag: The request's tag.
    """

    def __init__(self, action: str, caller: str, tag: int) -> None:
        self.action = action
        self.caller = caller
        self.tag = tag
        self.started = False
        self._cancel_event: threading.Event | None = None
        self.task: asyncio.Task[None] | None = None
        self.is_async = False
        self.msg: Any = None
        self.fn: Any = None
        self.journal_line = 0
        self.waited = False
        self.stats: dict[str, int] | None = None  # the agent's counts (outgoing requests)

    @property
    def cancel_event(self) -> threading.Event:
        """Set when the caller cancels the request (or times out waiting)."""
        return create_once(self, '_cancel_event', _event_lock, threading.Event)

    @property
    def cancelled(self) -> bool:
        """Whether the caller cancelled the request (or timed out waiting)."""
        event = self._cancel_event
        return event is not None and event.is_set()


def current_action() -> ActionContext:
    """The context of the action running in this thread or task.

    Raises:
        AgentError: outside of an action.
    """
    ctx = _current.get()
    if ctx is None:
        raise AgentError('current_action() is only available inside a running action')
    return ctx


class AgentContext:
    """What a running behavior sees of its agent (``behavior.agent_context``).

    Attributes:
        agent_id: The agent's mailbox id.
        exchange: The exchange the agent serves its mailbox on.
    """

    def __init__(self, runtime: AgentRuntime) -> None:
        self._runtime = runtime
        self.agent_id = runtime.agent_id
        self.exchange = runtime.exchange
        self._state: State | None = None
        self._manager: Manager | None = None
        self._lock = threading.Lock()

    @property
    def state(self) -> State:
        """The agent's persistent state, restored from its last checkpoint on first use."""
        with self._lock:
            if self._state is None:
                from tether.agents.state import State, agents_home

                base = self._runtime.state_dir or str(agents_home() / 'state')
                self._state = State(f'{base}/{self.agent_id}.state')
            return self._state

    def shutdown(self) -> None:
        """Shut the agent down for good (its mailbox is terminated)."""
        self._runtime.request_shutdown(terminate=True)

    def handle(self, agent_id: str) -> Handle[Any]:
        """A handle to another agent of the same exchange."""
        return self.exchange.get_handle(agent_id)

    def launch(
        self, behavior: Behavior, *, launcher: Launcher | None = None, **kwargs: Any
    ) -> Handle[Any]:
        """Launch a child agent (default: in a thread of this agent's process).

        Children are shut down when this agent shuts down.
        """
        with self._lock:
            if self._manager is None:
                if _child_manager_factory is None:  # tether.agents imports the manager
                    raise AgentError('tether.agents.manager is not imported')
                self._manager = _child_manager_factory(self.exchange)
            manager = self._manager
        return manager.launch(behavior, launcher=launcher, **kwargs)

    def _close(self) -> None:
        if self._manager is not None:
            self._manager.close()
        if self._state is not None:
            self._state.checkpoint()
