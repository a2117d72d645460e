"""Slots of compute, shared between task pools: :class:`ResourceCounter`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from typing import Any

from tether.exceptions import ConfigError

__all__ = ['ResourceCounter']

# How often a blocked acquire looks at its cancel event (it is woken at once by releases).
_CANCEL_POLL = 0.05


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
        with self._cond:
            self._check(task)
            if not self._wait(lambda: self._available[task] >= n_slots, timeout, cancel_if):
                return False
            self._available[task] -= n_slots
            return True

    def release(self, task: str | None, n_slots: int) -> None:
        """Give back ``n_slots`` of ``task``'s pool."""
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
    ) -> bool:
        """Move ``n_slots`` (or ``'all'``) from one pool to another.

        Waits until that many slots of ``task_from`` are free (tasks finish and release
        them); returns ``False`` after ``timeout`` or on ``cancel_if`` without moving any.
        """
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
