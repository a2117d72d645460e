"""Handles: references to agents whose method calls become action requests.

``handle.square(2)`` sends a request to the agent's mailbox and returns an
:class:`ActionFuture` at once; ``.result(timeout)`` waits for the response and ``await``
works too (academy-py 1.0's style). Every handle in a process shares one client mailbox
per exchange, and one listener, which matches responses to futures by their tag.

A timeout at the caller (``future.result(timeout)`` or ``asyncio.wait_for``) and
``future.cancel()`` send a cancel message: the agent cancels the action (an ``async``
action is cancelled where it awaits; a synchronous one that has not started never runs,
and one that runs sees :func:`tether.agents.current_action` ``.cancelled`` become true).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
import itertools
import logging
import os
import pickle
import threading
import time
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from tether._clock import SYSTEM_CLOCK, Clock
from tether.agents._context import _current
from tether.agents._wake import Waker, thread_waker
from tether.agents.behavior import ActionInfo, Behavior, actions_of, describe_actions
from tether.agents.identifier import AgentId
from tether.agents.message import (
    Cancel,
    Describe,
    Message,
    Ping,
    Rejected,
    Request,
    Response,
    Shutdown,
    Stop,
    new_mailbox_id,
    rebuild_error,
)
from tether.exceptions import (
    ActionTimeoutError,
    AgentError,
    InvalidArgumentError,
    MailboxClosedError,
    MailboxLostError,
    TetherError,
)

if TYPE_CHECKING:
    from tether.agents.exchange import Exchange, MailboxStatus
    from tether.agents.exchange._base import Transport

__all__ = ['ActionFuture', 'Handle', 'ProxyHandle', 'Seconds', 'exchange_context']

logger = logging.getLogger(__name__)

B = TypeVar('B', bound=Behavior)
_DONE = frozenset({'CANCELLED', 'CANCELLED_AND_NOTIFIED', 'FINISHED'})
T = TypeVar('T')


class Seconds(float):
    """A duration in seconds that can also be awaited (``await handle.ping()``)."""

    def __await__(self) -> Generator[Any, None, Seconds]:
        return self
        yield  # pragma: no cover - makes this a generator


class ActionFuture(concurrent.futures.Future[T]):
    """The future result of a request to an agent.

    A :class:`concurrent.futures.Future` (usable with ``wait``/``as_completed``) that is
    also awaitable. ``result(timeout)`` that times out cancels the request at the agent
    and raises :class:`~tether.exceptions.ActionTimeoutError`.
    """

    def __init__(
        self,
        mailbox: _ClientMailbox,
        dest: str,
        tag: int,
        action: str,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__()
        self._clock = clock
        self._mailbox = mailbox
        self.agent_id = dest
        self.tag = tag
        self.action = action
        self._wakers: list[Waker] = []  # threads waiting in result() (see _wake)

    def cancel(self) -> bool:
        """Cancel the request here and at the agent (False if it already finished)."""
        if not super().cancel():
            return False
        self._wake()
        self._mailbox._cancelled(self)
        return True

    def set_result(self, result: T) -> None:
        super().set_result(result)
        self._wake()

    def set_exception(self, exception: BaseException | None) -> None:
        super().set_exception(exception)
        self._wake()

    def _wake(self) -> None:
        # A waiter registers under the future's lock before it checks the state, which
        # is changed under that lock: whoever registered before is in the list now.
        for waker in tuple(self._wakers):  # a copy: a waiter may leave meanwhile
            waker.wake()

    def _wait(self, timeout: float | None) -> None:
        """Return once done, or once ``timeout`` seconds passed."""
        if self._state in _DONE:
            return
        clock = self._clock
        if clock is not SYSTEM_CLOCK:
            self._wait_on(clock, timeout)
            return
        waker = thread_waker()
        if waker is None:  # no pipe: the base class's wait
            concurrent.futures.wait((self,), timeout)
            return
        waker.drain()  # what earlier waits left (a wake-up for this one comes later)
        with self._condition:
            if self._state in _DONE:
                return
            self._wakers.append(waker)
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            while self._state not in _DONE:
                if deadline is not None and time.monotonic() >= deadline:
                    return
                waker.wait(deadline)
                if self._state not in _DONE:
                    waker.drain()  # a wake-up meant for an earlier wait
        finally:
            self._wakers.remove(waker)

    def _wait_on(self, clock: Clock, timeout: float | None) -> None:
        """:meth:`_wait` measured on another clock than the system's (a test's)."""
        deadline = None if timeout is None else clock.monotonic() + timeout
        with self._condition:
            while self._state not in _DONE:
                remaining = None if deadline is None else deadline - clock.monotonic()
                if remaining is not None and remaining <= 0:
                    return
                clock.wait(self._condition, remaining)

    def result(self, timeout: float | None = None) -> T:
        """Wait for the result; on timeout, cancel the action and raise ActionTimeoutError."""
        try:
            self._wait(timeout)
            return super().result(0)
        except TimeoutError:
            if self.done():
                raise  # the action itself raised a TimeoutError
            self.cancel()
            raise ActionTimeoutError(
                f'action {self.action!r} of agent {self.agent_id} gave no result within '
                f'{timeout} s; it was cancelled at the agent',
            ) from None

    def __await__(self) -> Generator[Any, None, T]:
        return asyncio.wrap_future(self).__await__()


class _ClientMailbox:
    """This process's mailbox for responses, shared by every handle of one exchange."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.id = new_mailbox_id('client')
        self._tags = itertools.count(1)
        self._pending: dict[int, ActionFuture[Any]] = {}
        self._lock = threading.Lock()
        transport.register(self.id, None)
        self._listener = transport.listen(self.id, self._deliver)
        self._checked = 0  # requests with a lower tag were sent before the last check
        self._listener.on_check = self._check
        self._listener.on_lost = self._lost
        self.closed = False
        self.pid = os.getpid()

    def reserve(self, dest: str, action: str) -> ActionFuture[Any]:
        """A new tag, and the future its response settles (for a message sent by hand:
        :meth:`Transport.send_raw` in tests)."""
        future: ActionFuture[Any] = ActionFuture(
            self, dest, next(self._tags), action, self.transport.clock
        )
        with self._lock:
            self._pending[future.tag] = future
        return future

    def request(
        self,
        dest: str,
        kind: type[Message],
        action: str = '',
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> ActionFuture[Any]:
        if self.closed:
            raise AgentError('this process closed its client mailbox for the exchange')
        future = self.reserve(dest, action or kind.kind)
        tag = future.tag
        if kind is Request:
            msg: Message = Request(self.id, dest, tag, action, args, kwargs or {})
            running = _current.get()
            if running is not None and running.stats is not None:
                running.stats['outgoing'] += 1  # a request from an agent's action
        else:
            make: Callable[[str, str, int], Message] = kind
            msg = make(self.id, dest, tag)
        try:
            self.transport.send(msg)
        except BaseException:
            with self._lock:
                self._pending.pop(tag, None)
            raise
        return future

    def _deliver(self, item: Message | Rejected) -> None:
        if isinstance(item, Rejected):
            logger.warning('client mailbox %s refused a message: %s', self.id, item.error)
            if item.kind == Response.kind and item.tag is not None:
                with self._lock:
                    future = self._pending.pop(item.tag, None)
                if future is not None:
                    _settle(future, exception=item.error)
            return
        if type(item) is not Response:
            logger.warning('client mailbox %s got a %s message; ignored', self.id, item.kind)
            return
        with self._lock:
            future = self._pending.pop(item.tag, None)
        if future is None:
            return  # cancelled, timed out, or a duplicate
        if item.error is not None:
            _settle(
                future,
                exception=rebuild_error(
                    item.error, allow_pickle=self.transport.codec.allow_pickle
                ),
            )
        else:
            _settle(future, result=item.result)

    def _check(self) -> None:
        self._checked = next(self._tags)  # a tag of its own: later requests get higher ones

    def _lost(self) -> None:
        """The exchange lost this mailbox (and the agents' mailboxes with it): fail what
        waited when the loss was found, since its request or its answer may be gone,
        rather than wait forever (requests sent since are not affected)."""
        with self._lock:
            lost = [tag for tag in self._pending if tag < self._checked]
            pending = [self._pending.pop(tag) for tag in lost]
        for future in pending:
            _settle(
                future,
                exception=MailboxLostError(
                    f'the exchange lost its data while {future.action!r} of agent '
                    f'{future.agent_id} waited for an answer (Redis restarted without '
                    'persistence?): the request, or its answer, may be lost, and the action '
                    'may or may not have run; mailboxes were registered again, so a new '
                    'request can be sent',
                ),
            )

    def _cancelled(self, future: ActionFuture[Any]) -> None:
        with self._lock:
            self._pending.pop(future.tag, None)
        try:
            self.transport.send(Cancel(self.id, future.agent_id, future.tag))
        except TetherError as e:
            logger.debug('could not send a cancel to %s: %s', future.agent_id, e)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with self._lock:
            pending, self._pending = self._pending, {}
        for future in pending.values():
            _settle(future, exception=AgentError('the client mailbox was closed'))
        try:
            self._listener.close()
            self.transport.terminate(self.id)
        except TetherError:
            logger.debug('closing client mailbox %s failed', self.id, exc_info=True)


def _settle(
    future: concurrent.futures.Future[Any],
    *,
    result: Any = None,
    exception: BaseException | None = None,
) -> None:
    try:
        if exception is not None:
            future.set_exception(exception)
        else:
            future.set_result(result)
    except concurrent.futures.InvalidStateError:
        pass  # cancelled meanwhile


class _ActionMethod:
    __slots__ = ('handle', 'name')

    def __init__(self, handle: Handle[Any], name: str) -> None:
        self.handle = handle
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> ActionFuture[Any]:
        return self.handle.action(self.name, *args, **kwargs)

    def __repr__(self) -> str:
        return f'<action {self.name!r} of {self.handle!r}>'


exchange_context: contextvars.ContextVar[Any] = contextvars.ContextVar(
    'tether_agents_exchange', default=None
)
"""The exchange a :class:`Handle` made without one uses (academy-py 1.0's
``Handle(agent_id)``): set inside ``async with tether.agents.aio.Manager(...)`` and in a
running agent's actions and ``async`` loops. It holds an exchange, or anything with an
``exchange`` attribute (a :class:`~tether.agents.exchange.UserExchangeClient`)."""


def _context_exchange() -> Exchange:
    from tether.agents.exceptions import ExchangeClientNotFoundError

    value = exchange_context.get()
    if value is None:
        raise ExchangeClientNotFoundError(
            'this handle was made without an exchange and none is set here: make it '
            'inside `async with Manager(...)` (tether.agents.aio) or in a running agent, '
            'or pass the exchange: Handle(agent_id, exchange)'
        )
    return getattr(value, 'exchange', value)  # type: ignore[no-any-return]


def _context_value() -> Any:
    """What the context holds (an exchange, or a client with an ``exchange``)."""
    _context_exchange()  # raises where none is set
    return exchange_context.get()


class Handle(Generic[B]):
    """A reference to an agent: calling one of its actions returns an :class:`ActionFuture`.

    Handles pickle as their agent id and exchange (a few hundred bytes, no secret) and
    work in any process that can reach the exchange.

    Args:
        agent_id: The agent's mailbox id.
        exchange: The exchange the agent is registered with. Without it (academy-py 1.0's
            ``Handle(agent_id)``), the handle uses the exchange of the context it is used
            in (:data:`exchange_context`).
    """

    def __init__(
        self, agent_id: str, exchange: Any = None, *, ignore_context: bool = False
    ) -> None:
        if ignore_context and exchange is None:
            raise InvalidArgumentError(
                'Cannot make a handle with ignore_context=True and no explicit exchange: '
                'pass Handle(agent_id, exchange, ignore_context=True)'
            )
        self.agent_id = agent_id
        self.ignore_context = ignore_context
        self._given = exchange  # as given: an exchange or a UserExchangeClient
        self._exchange: Exchange | None = getattr(exchange, 'exchange', exchange)

    @property
    def exchange(self) -> Any:
        """The exchange the agent is reached through: the one given, else what the
        context holds (:data:`exchange_context`: inside ``async with`` a manager or a
        :class:`~tether.agents.exchange.UserExchangeClient`, that client, as academy-py).

        Raises:
            ExchangeClientNotFoundError: for a handle made without an exchange, used
                where no exchange is set (see :data:`exchange_context`).
        """
        return self._given if self._given is not None else _context_value()

    def _bound(self) -> Exchange:
        """The tether exchange this handle sends through now."""
        exchange = self._exchange
        return exchange if exchange is not None else _context_exchange()

    def __repr__(self) -> str:
        return f'Handle({self.agent_id!r}, {self._given!r})'

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Handle)
            and other.agent_id == self.agent_id
            and other._bound().key() == self._bound().key()
        )

    def __hash__(self) -> int:
        return hash(self.agent_id)

    def __reduce__(self) -> tuple[Any, ...]:
        if self.ignore_context:
            raise pickle.PicklingError(
                f'a handle of {self.agent_id} made with ignore_context=True does not '
                'pickle (academy-py 1.0): make it without ignore_context'
            )
        try:
            exchange = self._bound()
        except AgentError as e:
            raise pickle.PicklingError(
                f'cannot pickle an unbound handle of {self.agent_id}: {e}'
            ) from e
        return (Handle, (self.agent_id, exchange))

    def __getattr__(self, name: str) -> Any:
        if name.startswith('_') or name == 'agent_id':
            raise AttributeError(name)
        return _ActionMethod(self, name)

    def _mailbox(self) -> _ClientMailbox:
        if self._exchange is None:  # the context's exchange, which may change
            return self._context_exchange_mailbox()
        cached = self.__dict__.get('_cached')
        if cached is not None and not cached.closed and cached.pid == os.getpid():
            return cached  # type: ignore[no-any-return]
        mailbox = self._bound().transport().client()
        self.__dict__['_cached'] = mailbox
        return mailbox

    def _context_exchange_mailbox(self) -> _ClientMailbox:
        exchange = _context_exchange()
        cached = self.__dict__.get('_cached')
        if (
            cached is not None
            and not cached.closed
            and cached.pid == os.getpid()
            and self.__dict__.get('_cached_exchange') is exchange
        ):
            return cached  # type: ignore[no-any-return]
        mailbox = exchange.transport().client()
        self.__dict__['_cached'] = mailbox
        self.__dict__['_cached_exchange'] = exchange
        return mailbox

    def action(self, name: str, /, *args: Any, **kwargs: Any) -> ActionFuture[Any]:
        """Request action ``name`` with these arguments; returns its future at once."""
        return self._mailbox().request(self.agent_id, Request, name, args, kwargs)

    def ping(self, *, timeout: float | None = None) -> Seconds:
        """Round-trip time to the agent, in seconds (also awaitable).

        Raises:
            ActionTimeoutError: if the agent does not answer within ``timeout``.
        """
        start = time.perf_counter()
        self._mailbox().request(self.agent_id, Ping).result(timeout)
        return Seconds(time.perf_counter() - start)

    def shutdown(self, *, terminate: bool | None = None) -> ActionFuture[None]:
        """Ask the agent to shut down; the future is done once it accepted.

        Args:
            terminate: ``True`` or ``None`` (default): for good, its mailbox is closed.
                ``False``: the agent stops and keeps its mailbox (messages wait in it, and
                it can be launched again with the same id).
        """
        kind = Stop if terminate is False else Shutdown
        return self._mailbox().request(self.agent_id, kind)

    def describe(self, *, timeout: float | None = None) -> dict[str, ActionInfo]:
        """The agent's actions: names, signatures and docstrings."""
        raw = self._mailbox().request(self.agent_id, Describe).result(timeout)
        return {name: ActionInfo.from_json(info) for name, info in raw.items()}

    def status(self) -> MailboxStatus:
        """The state of the agent's mailbox."""
        return self._bound().status(self.agent_id)


class ProxyHandle(Handle[B]):
    """A handle that calls the actions of a behavior object directly, in this process.

    For testing a behavior that takes handles to other agents without running any agent
    (academy-py 1.0's ``ProxyHandle``): ``await proxy.action(...)`` runs the action (an
    ``async`` one on the caller's loop, a synchronous one in a worker thread) and returns
    its result or raises its exception. Only actions can be called, as through a real
    handle. No exchange is involved: ``ping()`` answers 0, ``shutdown()`` ends the proxy
    (later calls raise :class:`~tether.exceptions.MailboxClosedError`). It pickles as a
    copy of its behavior.

    Args:
        behavior: The behavior object.
    """

    def __init__(self, behavior: B) -> None:
        if not isinstance(behavior, Behavior):
            raise AgentError(f'ProxyHandle needs a Behavior, got {type(behavior).__name__}')
        super().__init__(AgentId[B].new(), None)
        self.agent = behavior
        self._closed = False
        self._actions = actions_of(type(behavior))

    @property
    def exchange(self) -> Any:
        raise AgentError('a ProxyHandle has no exchange: it calls its behavior directly')

    def __repr__(self) -> str:
        return f'ProxyHandle(agent={self.agent!r})'

    def __str__(self) -> str:
        return f'ProxyHandle<{self.agent}>'

    def __eq__(self, other: object) -> bool:
        return other is self

    def __hash__(self) -> int:
        return hash(self.agent_id)

    def __reduce__(self) -> tuple[Any, ...]:
        return (ProxyHandle, (self.agent,))

    def __getattr__(self, name: str) -> Any:
        if name.startswith('_') or name in ('agent', 'agent_id'):
            raise AttributeError(name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self._run(name, args, kwargs)

        call.__name__ = name
        return call

    def _check(self) -> None:
        if self._closed:
            raise MailboxClosedError(f'the ProxyHandle {self.agent_id} was shut down')

    async def _run(self, name: str, args: Any, kwargs: Any) -> Any:
        self._check()
        fn = self._actions.get(name)
        if fn is None:
            what = 'has no attribute' if not hasattr(self.agent, name) else 'has'
            kind = '' if what == 'has no attribute' else ', but it is not a method marked @action'
            raise AttributeError(
                f'{type(self.agent).__name__} {what} {name!r}{kind}; its actions: '
                f'{", ".join(sorted(self._actions)) or "none"}'
            )
        bound = fn.__get__(self.agent)
        if inspect.iscoroutinefunction(fn):
            return await bound(*args, **kwargs)
        return await asyncio.to_thread(bound, *args, **kwargs)

    def action(self, name: str, /, *args: Any, **kwargs: Any) -> Any:
        """Run action ``name`` (await the result)."""
        return self._run(name, args, kwargs)

    def ping(self, *, timeout: float | None = None) -> Any:
        """Awaitable 0.0 (no round trip)."""
        self._check()

        async def zero() -> float:
            return 0.0

        return zero()

    def shutdown(self, *, terminate: bool | None = None) -> Any:
        """End the proxy (awaitable): later calls raise MailboxClosedError."""
        del terminate
        self._check()
        self._closed = True

        async def done() -> None:
            return None

        return done()

    def describe(self, *, timeout: float | None = None) -> Any:
        """The behavior's actions: names, signatures and docstrings."""
        return describe_actions(type(self.agent))
