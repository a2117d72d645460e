"""Hammer a callable or an object from many threads at once and report what failed.

Races show up when many threads run the same code at the same moment; a test that
starts a few threads in a loop and collects their exceptions by hand is written over and
over. :func:`hammer` does it once: every thread waits at a barrier, then calls
``work(thread, call)`` ``calls`` times; every exception is recorded with its thread, call
number and traceback, and a thread still running at the timeout is reported as hung
(never waited for forever)::

    from tether.testing import hammer

    hammer(lambda thread, call: store.put((thread, call)), threads=8, calls=100)

:func:`hammer_object` mixes several operations on one object, so that different methods
race with each other.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from tether.exceptions import HammerError

__all__ = ['HammerFailure', 'HammerReport', 'hammer', 'hammer_object']

T = TypeVar('T')

_SHOWN = 3


@dataclass(frozen=True)
class HammerFailure:
    """One call that raised.

    Attributes:
        thread: The index of the thread (``0`` to ``threads - 1``).
        call: The index of the call within that thread.
        error: The exception the call raised.
        traceback: The formatted traceback of ``error``.
    """

    thread: int
    call: int
    error: BaseException
    traceback: str


@dataclass
class HammerReport:
    """What happened when :func:`hammer` ran.

    Attributes:
        threads: How many threads ran.
        calls: How many calls each thread was to make.
        completed: How many calls returned or raised (at most ``threads * calls``).
        failures: The calls that raised, in the order they raised.
        hung: The threads still running when the timeout passed.
        seconds: Wall time of the run.
    """

    threads: int
    calls: int
    completed: int = 0
    failures: list[HammerFailure] = field(default_factory=list)
    hung: list[int] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether every call of every thread returned."""
        return not self.failures and not self.hung and self.completed == self.threads * self.calls

    def check(self) -> None:
        """Raise :class:`~tether.exceptions.HammerError` unless :attr:`ok`.

        The first failure's exception is chained as ``__cause__``.
        """
        if not self.ok:
            cause = self.failures[0].error if self.failures else None
            raise HammerError(self) from cause

    def __str__(self) -> str:
        total = self.threads * self.calls
        head = (
            f'{len(self.failures)} of {total} calls from {self.threads} threads failed, '
            f'{self.completed} completed in {self.seconds:.1f} s'
        )
        lines = [head]
        if self.hung:
            lines.append(f'threads still running at the timeout (hung?): {self.hung}')
        for f in self.failures[:_SHOWN]:
            lines.append(f'--- thread {f.thread}, call {f.call}:\n{f.traceback.rstrip()}')
        if len(self.failures) > _SHOWN:
            lines.append(f'... and {len(self.failures) - _SHOWN} more failures')
        return '\n'.join(lines)


def hammer(
    work: Callable[[int, int], object],
    *,
    threads: int = 8,
    calls: int = 50,
    timeout: float = 60.0,
    check: bool = True,
) -> HammerReport:
    """Call ``work(thread, call)`` ``calls`` times from each of ``threads`` threads.

    The threads start their calls together (a barrier), and each thread goes on after a
    failed call, so one run shows every kind of failure. A thread stops early once the
    timeout has passed; one still inside a call then is reported as hung and left
    behind (it is a daemon thread).

    Args:
        work: The callable to hammer; it gets the thread index and the call index.
        threads: How many threads call it at once.
        calls: How many calls each thread makes.
        timeout: Seconds the whole run may take.
        check: Raise :class:`~tether.exceptions.HammerError` if a call failed or a
            thread hung (else only return the report).

    Returns:
        The report of the run.

    Raises:
        HammerError: if ``check`` and not every call returned.
    """
    if threads < 1 or calls < 1:
        raise ValueError(f'hammer needs at least one thread and one call, not {threads}/{calls}')
    if not callable(work):
        raise TypeError(f'hammer needs a callable, not {type(work).__name__}')
    report = HammerReport(threads=threads, calls=calls)
    lock = threading.Lock()
    barrier = threading.Barrier(threads)
    give_up = threading.Event()

    def run(index: int) -> None:
        try:
            barrier.wait(timeout)
        except threading.BrokenBarrierError:
            return
        for call in range(calls):
            if give_up.is_set():
                return
            try:
                work(index, call)
            except BaseException as e:
                failure = HammerFailure(index, call, e, traceback.format_exc())
                with lock:
                    report.failures.append(failure)
                    report.completed += 1
            else:
                with lock:
                    report.completed += 1

    started = time.monotonic()
    deadline = started + timeout
    workers = [
        threading.Thread(target=run, args=(i,), name=f'hammer-{i}', daemon=True)
        for i in range(threads)
    ]
    for t in workers:
        t.start()
    for t in workers:
        t.join(max(0.0, deadline - time.monotonic()))
    give_up.set()
    barrier.abort()
    report.hung = [i for i, t in enumerate(workers) if t.is_alive()]
    report.seconds = time.monotonic() - started
    if check:
        report.check()
    return report


def hammer_object(
    target: T,
    operations: Sequence[Callable[[T], object]],
    *,
    threads: int = 8,
    calls: int = 50,
    timeout: float = 60.0,
    check: bool = True,
) -> HammerReport:
    """Hammer ``target`` with a mix of ``operations`` from many threads.

    Call ``call`` of thread ``thread`` runs ``operations[(thread + call) % len(operations)]
    (target)``, so at any moment different threads run different operations on the same
    object.

    Args:
        target: The object shared by every thread.
        operations: Callables taking ``target`` (e.g. ``lambda c: c.put(b'x')``).
        threads: How many threads at once.
        calls: How many calls each thread makes.
        timeout: Seconds the whole run may take.
        check: Raise :class:`~tether.exceptions.HammerError` on any failure.

    Returns:
        The report of the run.
    """
    ops = list(operations)
    if not ops:
        raise ValueError('hammer_object needs at least one operation')

    def work(thread: int, call: int) -> object:
        return ops[(thread + call) % len(ops)](target)

    return hammer(work, threads=threads, calls=calls, timeout=timeout, check=check)
