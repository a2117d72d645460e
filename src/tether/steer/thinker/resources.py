"""Slots of compute, shared between task pools: :class:`ResourceCounter`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from typing import Any

from tether.exceptions import ConfigError

__all__ = ['ReallocatorThread', 'ResourceCounter']

# How often a blocked acquire looks at its cancel event (it is woken at once by releases).
_CANCEL_POLL = 0.05


def _timeout(timeout: float | None) -> float | None:
    # Colmena spells "no timeout" as -1 (any value <= 0); tether as None.
    return None if timeout is None or timeout < 0 else timeout


def _cancelled(cancel_if: Any) -> bool:
    if cancel_if is None:
        return False
    if isinstance(cancel_if, threading.Event):
        return cancel_if.is_set()
    return bool(cancel_if())


class ResourceCounter:
    """Count the slots each task pool may use.

    All ``total_slots`` start unallocated (pool ``None``); :meth:`reallocate` moves them
    between pools. A task submitter :meth:`acquire` s slots of its pool before it submits,
    and the result processor :meth:`release` s them when the result arrives.

    Args:
        total_slots: Slots in all.
        task_types: Names of the pools.
    """

    def __init__(self, total_slots: int, task_types: Collection[str] = ()) -> None:
        if total_slots < 0:
            raise ConfigError('total_slots must be >= 0')
        if isinstance(task_types, str):
            raise ConfigError('task_types must be a collection of names, not one string')
        self._total = total_slots
        self._allocated: dict[str | None, int] = {None: total_slots}
        self._available: dict[str | None, int] = {None: total_slots}
        for t in task_types:
            self._allocated[t] = 0
            self._available[t] = 0
        self._cond = threading.Condition()

    def __repr__(self) -> str:
        pools = ', '.join(f'{k}={self._available[k]}/{v}' for k, v in self._allocated.items())
        return f'ResourceCounter({pools})'

    def _counter_of(self, *tasks: str | None) -> ResourceCounter:
        """The counter holding the slots of pools ``tasks``: this one.

        A counter of several kinds overrides it with the counter of their kind, so that
        :meth:`acquire`, :meth:`release` and :meth:`reallocate` work on it unchanged.
        """
        del tasks
        return self

    def _check(self, task: str | None) -> None:
        if task not in self._allocated:
            raise ConfigError(
                f'unknown task pool {task!r}; pools: {[k for k in self._allocated if k]}',
            )

    @property
    def total_slots(self) -> int:
        """Slots in all."""
        return self._total

    @property
    def task_types(self) -> list[str]:
        """Names of the pools."""
        return [k for k in self._allocated if k is not None]

    @property
    def unallocated_slots(self) -> int:
        """Slots in no pool."""
        return self.available_slots(None)

    def allocated_slots(self, task: str | None) -> int:
        """Slots given to ``task``'s pool (in use or not)."""
        with self._cond:
            self._check(task)
            return self._allocated[task]

    def available_slots(self, task: str | None) -> int:
        """Slots of ``task``'s pool not acquired."""
        with self._cond:
            self._check(task)
            return self._available[task]

    def active_slots(self, task: str | None) -> int:
        """Slots of ``task``'s pool acquired (tasks running)."""
        with self._cond:
            self._check(task)
            return self._allocated[task] - self._available[task]

    def _wait(
        self,
        ready: Callable[[], bool],
        timeout: float | None,
        cancel_if: Any,
    ) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not ready():
            if _cancelled(cancel_if):
                return False
            wait = _CANCEL_POLL if cancel_if is not None else None
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                wait = left if wait is None else min(wait, left)
            self._cond.wait(wait)
        return True

    def acquire(
        self,
        task: str | None,
        n_slots: int,
        timeout: float | None = None,
        cancel_if: threading.Event | Callable[[], bool] | None = None,
    ) -> bool:
        """Take ``n_slots`` of ``task``'s pool, waiting for them; return whether it did.

        Returns ``False`` after ``timeout`` seconds, or once ``cancel_if`` is set (an
        event) or true (a callable), without taking anything.
        """
        if n_slots < 0:
            raise ConfigError('n_slots must be >= 0')
        return self._counter_of(task)._take(task, n_slots, _timeout(timeout), cancel_if)

    def _take(
        self,
        task: str | None,
        n_slots: int,
        timeout: float | None,
        cancel_if: threading.Event | Callable[[], bool] | None,
    ) -> bool:
        with self._cond:
            self._check(task)
            if not self._wait(lambda: self._available[task] >= n_slots, timeout, cancel_if):
                return False
            self._available[task] -= n_slots
            return True

    def release(
        self,
        task: str | None = None,
        n_slots: int = 1,
        rerequest: bool = False,
        timeout: float | None = -1,
    ) -> bool | None:
        """Give back ``n_slots`` of ``task``'s pool.

        With ``rerequest=True``, take them again at once (waiting up to ``timeout``
        seconds; ``None`` or a negative value waits for ever) and return whether that
        succeeded; otherwise return ``None``.
        """
        self._counter_of(task)._release(task, n_slots)
        if rerequest:
            return self.acquire(task, n_slots, timeout=timeout)
        return None

    def _release(self, task: str | None, n_slots: int) -> None:
        with self._cond:
            self._check(task)
            if self._available[task] + n_slots > self._allocated[task]:
                raise ConfigError(
                    f'release of {n_slots} slot(s) to pool {task!r} exceeds its allocation '
                    f'({self._allocated[task]}, {self._available[task]} free)',
                )
            self._available[task] += n_slots
            self._cond.notify_all()

    def reallocate(
        self,
        task_from: str | None,
        task_to: str | None,
        n_slots: int | str,
        timeout: float | None = None,
        cancel_if: threading.Event | Callable[[], bool] | None = None,
        *,
        block: bool = True,
        callback: Callable[[], Any] | None = None,
    ) -> bool:
        """Move ``n_slots`` (or ``'all'``) from one pool to another.

        Waits until that many slots of ``task_from`` are free (tasks finish and release
        them); returns ``False`` after ``timeout`` or on ``cancel_if`` without moving any.
        With ``block=False`` the move happens on a background thread and this returns
        ``True`` at once; ``callback`` (if given) is called after a move completes.
        """
        if not block:
            thread = threading.Thread(
                target=self.reallocate,
                args=(task_from, task_to, n_slots, timeout, cancel_if),
                kwargs={'callback': callback},
                daemon=True,
                name='tether-steer-reallocate',
            )
            thread.start()
            return True
        counter = self._counter_of(task_from, task_to)
        moved = counter._reallocate(task_from, task_to, n_slots, _timeout(timeout), cancel_if)
        if moved and callback is not None:
            callback()
        return moved

    def _reallocate(
        self,
        task_from: str | None,
        task_to: str | None,
        n_slots: int | str,
        timeout: float | None,
        cancel_if: threading.Event | Callable[[], bool] | None,
    ) -> bool:
        with self._cond:
            self._check(task_from)
            self._check(task_to)
            if n_slots == 'all':
                n = self._allocated[task_from]
            elif isinstance(n_slots, int) and n_slots >= 0:
                n = n_slots
            else:
                raise ConfigError(f"n_slots must be an int >= 0 or 'all', not {n_slots!r}")
            if n > self._allocated[task_from]:
                raise ConfigError(
                    f'cannot move {n} slot(s) from pool {task_from!r}: it has '
                    f'{self._allocated[task_from]}',
                )
            if not self._wait(lambda: self._available[task_from] >= n, timeout, cancel_if):
                return False
            self._available[task_from] -= n
            self._allocated[task_from] -= n
            self._available[task_to] += n
            self._allocated[task_to] += n
            self._cond.notify_all()
            return True


class ReallocatorThread(threading.Thread):
    """Move slots into a pool until told to stop, then move them on (Colmena's helper).

    While running, it takes ``slot_step`` slots at a time from ``gather_from`` into
    ``gather_to`` (as they become free) until it moved ``max_slots`` (``None``: no
    limit). Once ``stop_event`` is set it moves every slot of ``gather_to`` to
    ``disperse_to`` (waiting for them to be released) and exits.

    Args:
        resource_counter: The counter whose slots it moves.
        gather_from: Pool to take slots from.
        gather_to: Pool to put them in.
        disperse_to: Pool to move ``gather_to``'s slots to when stopped.
        max_slots: Most slots to gather (``None``: all it can get).
        stop_event: The event that stops it (a new one if not given: ``stop_event``).
        slot_step: Slots moved per step.
        logger_name: Accepted for Colmena compatibility (tether logs under this module).
    """

    def __init__(  # noqa: PLR0917 (Colmena's positional order)
        self,
        resource_counter: ResourceCounter,
        gather_from: str | None,
        gather_to: str | None,
        disperse_to: str | None,
        max_slots: int | None = None,
        stop_event: threading.Event | None = None,
        slot_step: int = 1,
        logger_name: str | None = None,
    ) -> None:
        super().__init__(daemon=True, name='tether-steer-reallocator')
        if gather_from == gather_to:
            raise ConfigError('gather_from and gather_to must be different pools')
        if slot_step < 1:
            raise ConfigError('slot_step must be >= 1')
        self.resource_counter = resource_counter
        self.gather_from = gather_from
        self.gather_to = gather_to
        self.disperse_to = disperse_to
        self.max_slots = max_slots
        self.slot_step = slot_step
        self.stop_event = stop_event if stop_event is not None else threading.Event()
        self.logger_name = logger_name

    def run(self) -> None:
        rec = self.resource_counter
        moved = 0
        while not self.stop_event.is_set():
            if self.max_slots is not None and moved >= self.max_slots:
                self.stop_event.wait()
                break
            step = self.slot_step
            if self.max_slots is not None:
                step = min(step, self.max_slots - moved)
            step = min(step, rec.allocated_slots(self.gather_from))
            if step == 0:  # nothing left to gather: wait for slots to appear, or the stop
                self.stop_event.wait(_CANCEL_POLL)
                continue
            if rec.reallocate(self.gather_from, self.gather_to, step, cancel_if=self.stop_event):
                moved += step
        # Hand every slot of the pool on, waiting for those in use to be released.
        rec.reallocate(self.gather_to, self.disperse_to, 'all')
