"""The Thinker: a steering policy written as agents that run concurrently."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar, overload

from tether.exceptions import ConfigError, KillSignalError, SteerQueueError, SteerTimeoutError
from tether.steer.thinker.resources import ResourceCounter

__all__ = [
    'BaseThinker',
    'agent',
    'event_responder',
    'result_processor',
    'task_submitter',
]

F = TypeVar('F', bound=Callable[..., Any])

_AGENT = '_tether_steer_agent'
_STARTUP = '_tether_steer_startup'
# How often a looping agent blocked on a queue or event looks at the done flag.
_POLL = 0.1


def _mark(fn: F, startup: bool) -> F:
    setattr(fn, _AGENT, True)
    setattr(fn, _STARTUP, startup)
    return fn


@overload
def agent(func: F) -> F: ...


@overload
def agent(*, startup: bool = False) -> Callable[[F], F]: ...


def agent(func: Any = None, *, startup: bool = False) -> Any:
    """Mark a Thinker method as an agent: it runs in its own thread when the Thinker runs.

    When a (non-startup) agent returns, the Thinker is done: its ``done`` event is set and
    every other agent stops. A ``startup`` agent may return without stopping the others
    (use it to seed work).
    """
    if func is not None:
        return _mark(func, startup)
    return lambda f: _mark(f, startup)


def result_processor(func: Any = None, *, topic: str = 'default') -> Any:
    """Make a method that is called with each result of ``topic`` until the Thinker is done."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def loop(self: BaseThinker) -> None:
            while not self.done.is_set():
                try:
                    result = self.queues.get_result(topic, timeout=_POLL)
                except SteerTimeoutError:
                    continue
                except KillSignalError:
                    self.logger.info('kill signal on topic %r: stopping', topic)
                    return
                fn(self, result)

        return _mark(loop, False)

    return wrap(func) if func is not None else wrap


def _attribute_or_value(thinker: Any, value: Any) -> Any:
    """``value``, or the Thinker's attribute it names (Colmena's ``n_slots='attr'``)."""
    if isinstance(value, str):
        if not hasattr(thinker, value):
            raise ConfigError(f'{type(thinker).__name__} has no attribute {value!r}')
        return getattr(thinker, value)
    return value


def task_submitter(
    func: Any = None,
    *,
    task_type: str | None = None,
    n_slots: int | str = 1,
) -> Any:
    """Make a method that is called each time ``n_slots`` of ``task_type`` are acquired.

    The slots stay acquired: release them (``self.rec.release``) when the task's result
    arrives. The Thinker needs a :class:`ResourceCounter`. ``n_slots`` may name an
    attribute of the Thinker that holds the number (read when the agent starts).
    """

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def loop(self: BaseThinker) -> None:
            rec = self._require_rec(fn.__name__)
            n = _attribute_or_value(self, n_slots)
            while not self.done.is_set():
                if rec.acquire(task_type, n, cancel_if=self.done):
                    fn(self)

        return _mark(loop, False)

    return wrap(func) if func is not None else wrap


def event_responder(
    func: Any = None,
    *,
    event_name: str,
    reallocate_resources: bool = False,
    gather_from: str | None = None,
    gather_to: str | None = None,
    disperse_to: str | None = None,
    max_slots: int | str | None = None,
    slot_step: int = 1,
) -> Any:
    """Make a method that runs each time the event ``self.<event_name>`` is set.

    The event is cleared after the method returns. With ``reallocate_resources``, slots
    move from ``gather_from`` to ``gather_to`` (``slot_step`` at a time, up to
    ``max_slots``) while the method runs, and all of ``gather_to``'s slots move to
    ``disperse_to`` after it (if given).
    """
    if reallocate_resources and (gather_from == gather_to or gather_to is None):
        raise ConfigError('reallocate_resources needs gather_to, different from gather_from')

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def loop(self: BaseThinker) -> None:
            event = getattr(self, event_name, None)
            if not isinstance(event, threading.Event):
                raise ConfigError(
                    f'{type(self).__name__}.{event_name} must be a threading.Event '
                    f'(event_responder {fn.__name__})',
                )
            rec = self._require_rec(fn.__name__) if reallocate_resources else None
            while not self.done.is_set():
                if not event.wait(_POLL):
                    continue
                stop = threading.Event()
                gatherer = None
                if rec is not None:
                    gatherer = threading.Thread(
                        target=self._gather,
                        args=(
                            rec,
                            gather_from,
                            gather_to,
                            _attribute_or_value(self, max_slots),
                            slot_step,
                            stop,
                        ),
                        name=f'{fn.__name__}-gather',
                        daemon=True,
                    )
                    gatherer.start()
                try:
                    fn(self)
                finally:
                    stop.set()
                    if gatherer is not None:
                        gatherer.join()
                    event.clear()
                if rec is not None and disperse_to is not None:
                    rec.reallocate(gather_to, disperse_to, 'all', cancel_if=self.done)

        return _mark(loop, False)

    return wrap(func) if func is not None else wrap


class BaseThinker(threading.Thread):
    """A steering policy: subclass it and write agents with the decorators.

    Args:
        queues: The queues to the task server.
        resource_counter: Slots per task pool (needed by task submitters and by event
            responders that reallocate).
        daemon: Whether the Thinker's thread is a daemon.
        logger_name: Name of the Thinker's logger (default: the class's module and name);
            each agent logs to a child logger named after it.

    Attributes:
        done: Set when the Thinker is finishing; agents stop when they see it.
        queues: The queues to the task server.
        rec: The resource counter (``resource_counter``), or ``None``.
        logger: The Thinker's logger.
    """

    def __init__(
        self,
        queues: Any,
        resource_counter: ResourceCounter | None = None,
        daemon: bool = True,
        logger_name: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(daemon=daemon, **kwargs)
        self.queues = queues
        if hasattr(queues, 'set_role'):
            queues.set_role('client')
        self.rec = resource_counter
        self.done = threading.Event()
        self.logger = logging.getLogger(
            logger_name or f'{type(self).__module__}.{type(self).__name__}',
        )
        self._errors: list[BaseException] = []
        # What is private to each agent's thread (its name; whatever prepare_agent keeps).
        self.local_details = threading.local()

    def _require_rec(self, name: str) -> ResourceCounter:
        if self.rec is None:
            raise ConfigError(f'agent {name} needs a ResourceCounter: pass resource_counter=')
        return self.rec

    def _gather(  # noqa: PLR0917
        self,
        rec: ResourceCounter,
        gather_from: str | None,
        gather_to: str | None,
        max_slots: int | None,
        step: int,
        stop: threading.Event,
    ) -> None:
        moved = 0

        def cancel() -> bool:
            return stop.is_set() or self.done.is_set()

        while (max_slots is None or moved < max_slots) and not cancel():
            n = step if max_slots is None else min(step, max_slots - moved)
            if rec.allocated_slots(gather_from) < n:
                # Wait for slots to appear in the source pool, or for the stop.
                if stop.wait(_POLL):
                    return
                continue
            if rec.reallocate(gather_from, gather_to, n, cancel_if=cancel):
                moved += n

    @classmethod
    def list_agents(cls) -> list[Callable[..., Any]]:
        """The class's agents, in definition order."""
        found: dict[str, Callable[..., Any]] = {}
        for klass in reversed(cls.__mro__):
            for name, value in vars(klass).items():
                if callable(value) and getattr(value, _AGENT, False):
                    found[name] = value
                elif name in found and not getattr(value, _AGENT, False):
                    found.pop(name)
        return list(found.values())

    @property
    def agent_name(self) -> str | None:
        """The name of the agent running in this thread (``None`` outside agents)."""
        return getattr(self.local_details, 'name', None)

    def prepare_agent(self) -> None:
        """Called in each agent's thread before the agent runs (override; Colmena's hook).

        :attr:`agent_name` names the agent; :attr:`local_details` holds what is private
        to its thread.
        """

    def tear_down_agent(self) -> None:
        """Called in each agent's thread after the agent returned or failed (override)."""

    def _run_agent(self, fn: Callable[..., Any]) -> None:
        name = fn.__name__
        self.local_details.name = name
        log = self.logger.getChild(name)
        log.info('agent %s started', name)
        try:
            self.prepare_agent()
            try:
                fn(self)
            finally:
                self.tear_down_agent()
        except BaseException as e:
            log.exception('agent %s failed: stopping the Thinker', name)
            self._errors.append(e)
            self.done.set()
            return
        log.info('agent %s finished', name)
        if not getattr(fn, _STARTUP, False):
            self.done.set()

    def run(self) -> None:
        """Run every agent in its own thread and return when all have stopped.

        The proxied inputs of the tasks whose results were read are deleted from their
        stores before it returns (``queues.finish_evictions()``).

        Raises:
            BaseException: The first error an agent raised (after every agent stopped), or
                a :class:`~tether.exceptions.SteerQueueError` if such an input could not be
                deleted, when called directly. Run as a thread (``start()``), the error is
                kept in :attr:`~tether.steer.thinker.BaseThinker.error`.
        """
        agents = self.list_agents()
        if not agents:
            raise ConfigError(f'{type(self).__name__} has no agents')
        threads = [
            threading.Thread(
                target=self._run_agent,
                args=(fn,),
                name=f'{type(self).__name__}.{fn.__name__}',
                daemon=True,
            )
            for fn in agents
        ]
        for t in threads:
            t.start()
        self.logger.info('launched %d agents', len(threads))
        for t in threads:
            t.join()
        self.done.set()
        self.logger.info('all agents stopped')
        # The proxied inputs of the tasks whose results were read are deleted in the
        # background: none is left behind when the Thinker returns, and a failure shows.
        finish = getattr(self.queues, 'finish_evictions', None)
        if finish is not None:
            try:
                finish()
            except SteerQueueError as e:
                self.logger.error('%s', e)
                self._errors.append(e)
        if self._errors and threading.current_thread() is not self:
            raise self._errors[0]

    def stop(self) -> None:
        """Ask every agent to stop (sets ``done``)."""
        self.done.set()

    @property
    def error(self) -> BaseException | None:
        """The first error an agent raised, if any (also raised by :meth:`run`)."""
        return self._errors[0] if self._errors else None
