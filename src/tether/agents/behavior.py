"""Behaviors: an agent's state, actions and control loops, written as a plain Python class.

A behavior is a class that inherits :class:`Behavior` (or its academy-py 1.0 name,
:class:`Agent`). Instance attributes hold its state; methods decorated with
:func:`action` can be invoked by other entities through a handle; methods decorated with
:func:`loop`, :func:`timer` or :func:`event` run while the agent runs. ``on_setup`` and
``on_shutdown`` are called when the agent starts and stops. Every method may be
synchronous or ``async``.

A behavior is still an ordinary object: construct it and call its methods in a unit test,
no exchange or launcher needed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Self, TypeVar, overload

from tether.agents.exceptions import AgentNotInitializedError
from tether.exceptions import BehaviorDefinitionError

if TYPE_CHECKING:
    from tether.agents._context import AgentContext
    from tether.agents.state import State

__all__ = [
    'ActionInfo',
    'Agent',
    'AgentDescription',
    'Behavior',
    'RESERVED_ACTION_NAMES',
    'action',
    'actions_of',
    'describe_actions',
    'event',
    'loop',
    'loops_of',
    'mro_of',
    'timer',
]

F = TypeVar('F', bound=Callable[..., Any])

_KIND = '_tether_agent_kind'
_TIMER = '_tether_timer_interval'
_EVENT = '_tether_event_name'


@dataclasses.dataclass(frozen=True)
class ActionInfo:
    """What an agent says about one of its actions.

    Attributes:
        name: The action's name (the method name).
        signature: The signature without ``self``, as text.
        doc: The docstring (empty when there is none).
        is_async: Whether the action is a coroutine function.
    """

    name: str
    signature: str
    doc: str
    is_async: bool

    def to_json(self) -> dict[str, Any]:
        """A JSON-native form (what travels in a describe reply)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ActionInfo:
        """Rebuild from :meth:`to_json`."""
        return cls(
            name=str(data['name']),
            signature=str(data['signature']),
            doc=str(data['doc']),
            is_async=bool(data['is_async']),
        )


@overload
def action(method: F) -> F: ...


@overload
def action(
    *, name: str | None = None, context: bool = False, allow_protected_name: bool = False
) -> Callable[[F], F]: ...


def action(
    method: F | None = None,
    *,
    name: str | None = None,
    context: bool = False,
    allow_protected_name: bool = False,
) -> Any:
    """Mark a method as an action that other entities can invoke through a handle.

    The method may be synchronous (run in the agent's thread pool) or ``async`` (run on
    the agent's event loop). Undecorated methods are private to the behavior.

    Args:
        name: The action's name (default: the method's name).
        context: Pass the request's :class:`~tether.agents.ActionContext` to the method
            as its ``context`` keyword argument (academy-py 1.0's ``@action(context=True)``;
            :func:`~tether.agents.current_action` gives the same object).
        allow_protected_name: Allow a reserved name (:data:`RESERVED_ACTION_NAMES`); such
            an action is reached only as ``handle.action('name', ...)``, since
            ``handle.name`` is the handle's own method.

    Raises:
        BehaviorDefinitionError: ``context=True`` on a method without a ``context``
            parameter.
    """

    def mark(fn: F) -> F:
        if context:
            _check_context_parameter(fn)
        setattr(fn, _KIND, 'action')
        if name is not None:
            fn._tether_action_name = name  # type: ignore[attr-defined]
        if context:
            fn._tether_action_context = True  # type: ignore[attr-defined]
        if allow_protected_name:
            fn._tether_allow_protected_name = True  # type: ignore[attr-defined]
        return fn

    return mark(method) if method is not None else mark


def _check_context_parameter(fn: Callable[..., Any]) -> None:
    parameter = inspect.signature(fn).parameters.get('context')
    if parameter is None:
        raise BehaviorDefinitionError(
            f'Action method "{fn.__name__}" must accept a "context" keyword argument '
            f'when used with @action(context=True) ({fn.__qualname__})',
        )
    if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.VAR_POSITIONAL):
        raise BehaviorDefinitionError(
            f'The "context" argument to action method "{fn.__name__}" must be passable '
            f'by keyword (it is given as context=...) ({fn.__qualname__})',
        )


def loop(method: F) -> F:
    """Mark a method as a control loop, started when the agent starts.

    A synchronous loop runs in its own thread and receives a :class:`threading.Event`;
    an ``async`` loop runs as a task and receives an :class:`asyncio.Event`. The event is
    set when the agent shuts down; the loop should then return. A loop may return early
    and the agent keeps running. An exception in a loop shuts the agent down unless the
    behavior sets ``shutdown_on_loop_error = False``.
    """
    _check_loop_signature(method)
    setattr(method, _KIND, 'loop')
    return method


def _check_loop_signature(method: Callable[..., Any]) -> None:
    """A loop is called with the shutdown event: refuse a method that cannot take it."""
    try:
        sig = inspect.signature(method)
    except (TypeError, ValueError):
        return
    positional = [
        p
        for p in sig.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    if len(positional) < 2 and not any(p.kind is p.VAR_POSITIONAL for p in positional):
        raise BehaviorDefinitionError(
            f'Signature of loop method "{method.__name__}" must be (self, shutdown): a '
            'loop receives the event that is set when the agent shuts down',
        )


def timer(interval: float) -> Callable[[F], F]:
    """Mark a method (no arguments) to be called every ``interval`` seconds while running."""
    if interval <= 0:
        raise ValueError(f'timer interval must be positive, got {interval}')

    def mark(fn: F) -> F:
        setattr(fn, _KIND, 'timer')
        setattr(fn, _TIMER, float(interval))
        return fn

    return mark


def event(name: str) -> Callable[[F], F]:
    """Mark a method (no arguments) to be called each time the event attribute ``name`` is set.

    ``name`` is the attribute of the behavior holding a :class:`threading.Event` (the
    method runs in a thread) or an :class:`asyncio.Event` (the method runs on the agent's
    loop). The event is cleared before each call.
    """

    def mark(fn: F) -> F:
        setattr(fn, _KIND, 'event')
        setattr(fn, _EVENT, name)
        return fn

    return mark


def _members(cls: type, kind: str) -> dict[str, Callable[..., Any]]:
    """The methods of ``cls`` marked ``kind``, the most derived definition of each name."""
    found: dict[str, Callable[..., Any]] = {}
    seen: set[str] = set()
    for klass in cls.__mro__:
        for attr, value in vars(klass).items():
            if attr in seen:
                continue
            seen.add(attr)
            fn = value.__func__ if isinstance(value, staticmethod | classmethod) else value
            if callable(fn) and getattr(fn, _KIND, None) == kind:
                found[attr] = fn
    return found


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn)


RESERVED_ACTION_NAMES: frozenset[str] = frozenset(
    {
        # What a Handle defines: an action of these names could only be reached with
        # handle.action(name), and ``describe`` would replace the agent's own answer.
        'action',
        'agent_id',
        'describe',
        'exchange',
        'ping',
        'shutdown',
        'status',
        # What Behavior defines (its callbacks, settings and the API of a running agent).
        'agent_context',
        'agent_launch_alongside',
        'agent_on_shutdown',
        'agent_on_startup',
        'agent_shutdown',
        'agent_state',
        'behavior_actions',
        'behavior_loops',
        'behavior_mro',
        'max_concurrency',
        'on_setup',
        'on_shutdown',
        'shutdown_on_loop_error',
    }
)
"""Names no action may have (its method name, or the ``name=`` given to :func:`action`):
the public names of :class:`~tether.agents.Handle` and of :class:`Behavior`. A behavior
that declares one is refused with
:class:`~tether.exceptions.BehaviorDefinitionError` when its class is defined."""


def actions_of(cls: type) -> dict[str, Callable[..., Any]]:
    """The action methods of behavior class ``cls``, by action name.

    What the runtime uses (a behavior may define a method named ``behavior_actions``
    without breaking its agent).
    """
    out = {}
    for attr, fn in _members(cls, 'action').items():
        out[getattr(fn, '_tether_action_name', attr)] = fn
    return out


def loops_of(cls: type) -> dict[str, Callable[..., Any]]:
    """The control loops, timers and event handlers of ``cls``, by method name."""
    out: dict[str, Callable[..., Any]] = {}
    for kind in ('loop', 'timer', 'event'):
        out.update(_members(cls, kind))
    return out


def describe_actions(cls: type) -> dict[str, ActionInfo]:
    """Names, signatures and docstrings of the actions of ``cls`` (the agent's answer to
    a describe request, whatever methods the behavior defines)."""
    out = {}
    for name, fn in sorted(actions_of(cls).items()):
        try:
            sig = inspect.signature(fn, eval_str=True)
        except Exception:  # annotations that do not evaluate here: keep them as text
            sig = inspect.signature(fn)
        params = list(sig.parameters.values())[1:]
        if getattr(fn, '_tether_action_context', False):
            params = [p for p in params if p.name != 'context']
        out[name] = ActionInfo(
            name=name,
            signature=str(sig.replace(parameters=params)),
            doc=inspect.getdoc(fn) or '',
            is_async=_is_async(fn),
        )
    return out


def mro_of(cls: type) -> list[str]:
    """Import paths of the behavior classes of ``cls``, most derived first (discovery)."""
    return [
        f'{k.__module__}.{k.__qualname__}'
        for k in cls.__mro__
        if issubclass(k, Behavior) and k is not Behavior and k is not Agent
    ]


class Behavior:
    """Base class of agent behaviors.

    Class attributes a behavior may set:

    * ``max_concurrency`` (default 32): the most actions this agent runs at once; more
      requests wait, in arrival order.
    * ``shutdown_on_loop_error`` (default ``True``): an exception in a control loop shuts
      the agent down (and a launcher with a restart policy restarts it).

    While running as an agent, :attr:`agent_id`, :attr:`agent_context`,
    :attr:`agent_state` and :meth:`agent_shutdown` are available.
    """

    max_concurrency: int | None = 32
    shutdown_on_loop_error: bool = True

    # Callbacks ------------------------------------------------------------------------

    def on_setup(self) -> Any:
        """Called when the agent starts, before loops run and actions are served."""

    def on_shutdown(self) -> Any:
        """Called when the agent stops, after its loops returned."""

    async def agent_on_startup(self) -> None:
        """academy-py 1.0's start callback: called after :meth:`on_setup`, before loops
        run and actions are served (override either; may be synchronous too)."""

    async def agent_on_shutdown(self) -> None:
        """academy-py 1.0's stop callback: called after the loops returned, before
        :meth:`on_shutdown` (override either; may be synchronous too)."""

    # Introspection --------------------------------------------------------------------

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        if cls in (Behavior, Agent):
            raise BehaviorDefinitionError(
                'The Agent type cannot be instantiated directly: define a subclass '
                '(class MyAgent(Behavior): ...) and launch an instance of it',
            )
        return super().__new__(cls)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        allowed = {
            name
            for name, fn in actions_of(cls).items()
            if getattr(fn, '_tether_allow_protected_name', False)
        }
        clashes = sorted((set(actions_of(cls)) - allowed) & RESERVED_ACTION_NAMES)
        if clashes:
            names = ', '.join(repr(n) for n in clashes)
            raise BehaviorDefinitionError(
                f'behavior {cls.__module__}.{cls.__qualname__} declares action {names}, '
                f'a name reserved by handles and behaviors (handle.{clashes[0]} is not '
                'an action call); rename the action, or give it another name with '
                f'@action(name=...). Reserved: {", ".join(sorted(RESERVED_ACTION_NAMES))}',
            )

    @classmethod
    def behavior_actions(cls) -> dict[str, Callable[..., Any]]:
        """The action methods of this behavior, by action name."""
        return actions_of(cls)

    @classmethod
    def behavior_loops(cls) -> dict[str, Callable[..., Any]]:
        """The control loops, timers and event handlers of this behavior, by method name."""
        return loops_of(cls)

    @classmethod
    def describe(cls) -> dict[str, ActionInfo]:
        """Names, signatures and docstrings of this behavior's actions."""
        return describe_actions(cls)

    @classmethod
    def behavior_mro(cls) -> list[str]:
        """Import paths of this behavior's classes, most derived first (for discovery)."""
        return mro_of(cls)

    # While running --------------------------------------------------------------------

    @property
    def agent_context(self) -> AgentContext:
        """The running agent's context (its id, exchange, launching children ...).

        Raises:
            AgentNotInitializedError: (an ``AgentError``) if this behavior is not running
                as an agent (a plain object).
        """
        ctx = self.__dict__.get('_tether_context')
        if ctx is None:
            raise AgentNotInitializedError(
                f'{type(self).__name__} is not running as an agent: launch it with a '
                'Manager (or a launcher) to use its agent context',
            )
        return ctx  # type: ignore[no-any-return]

    @property
    def agent_id(self) -> str:
        """The id (mailbox address) of the running agent."""
        return self.agent_context.agent_id

    @property
    def agent_state(self) -> State:
        """This agent's persistent state (restored when the agent restarts)."""
        return self.agent_context.state

    def agent_shutdown(self) -> None:
        """Ask the running agent to shut down (from an action, loop or callback)."""
        self.agent_context.shutdown()

    async def agent_launch_alongside(
        self,
        behavior: Behavior | type[Behavior],
        *,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        """Launch a child agent in this agent's process and return its handle
        (academy-py 1.0's name for ``self.agent_context.launch``; the child stops with
        this agent)."""
        instance = behavior(*args, **(kwargs or {})) if isinstance(behavior, type) else behavior
        return await asyncio.to_thread(self.agent_context.launch, instance)

    def __repr__(self) -> str:
        return f'{type(self).__name__}()'

    def __str__(self) -> str:
        return f'Agent<{type(self).__name__}>'

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if not k.startswith('_tether_')}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


@dataclasses.dataclass(frozen=True)
class AgentDescription:
    """An agent's answer to ``agent_describe`` (academy-py 1.0).

    Attributes:
        description: The agent class's docstring (empty when there is none).
        actions: Its actions by name (``agent_describe`` among them).
    """

    description: str
    actions: dict[str, ActionInfo]


class Agent(Behavior):
    """academy-py 1.0's agent base: a :class:`Behavior` held to academy-py's rules.

    Its actions and ``agent_on_startup``/``agent_on_shutdown`` must be ``async``
    (a synchronous one is refused when the class is defined, with
    :class:`~tether.exceptions.BehaviorDefinitionError`, a ``TypeError``), and it has an
    ``agent_describe`` action. Subclass :class:`Behavior` for synchronous actions.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, fn in actions_of(cls).items():
            if not _is_async(fn):
                raise BehaviorDefinitionError(
                    f'Action method "{name}" is not a coroutine: an academy-py Agent\'s '
                    'actions are async (subclass tether.agents.Behavior for synchronous '
                    'actions)',
                )
        for callback in ('agent_on_startup', 'agent_on_shutdown'):
            fn = getattr(cls, callback)
            if not _is_async(fn):
                raise BehaviorDefinitionError(
                    f'"{cls.__name__}.{callback}" is not a coroutine: define it with '
                    'async def (or subclass tether.agents.Behavior)',
                )

    @action
    async def agent_describe(self) -> AgentDescription:
        """Describe this agent: its docstring and its actions."""
        return AgentDescription(
            description=inspect.cleandoc(type(self).__doc__ or ''),
            actions=describe_actions(type(self)),
        )


def _wait_thread_event(ev: threading.Event, shutdown: threading.Event, step: float) -> bool:
    """Wait for ``ev`` or ``shutdown``; True when ``ev`` fired."""
    while not shutdown.is_set():
        if ev.wait(step):
            return True
    return False


async def _wait_async_event(ev: asyncio.Event, shutdown: asyncio.Event) -> bool:
    """Wait for ``ev`` or ``shutdown``; True when ``ev`` fired."""
    if ev.is_set():
        return True
    _done, pending = await asyncio.wait(
        [asyncio.ensure_future(ev.wait()), asyncio.ensure_future(shutdown.wait())],
        return_when=asyncio.FIRST_COMPLETED,
    )
    for task in pending:
        task.cancel()
    return ev.is_set()
