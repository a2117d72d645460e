"""``TaskFuture`` (also ``ComputeFuture``, the Globus Compute SDK's name): the future of
one task of an :class:`~tether.faas.Executor`."""

from __future__ import annotations

import concurrent.futures
import contextlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.faas._executor import Executor

__all__ = ['ComputeFuture', 'TaskFuture', 'cancel_local']


class TaskFuture(concurrent.futures.Future[Any]):
    """A future of one task.

    Attributes:
        task_id: The task's id at the service.
        timings: Timestamps (seconds since the epoch) the task collected on its way:
            ``client_submit``, ``service_received``, ``service_queued``,
            ``service_dispatched``, ``endpoint_received``, ``worker_start``,
            ``worker_end``, ``endpoint_sent``, ``service_result``,
            ``service_published``, ``service_sent``, ``client_received``.
        output: What the task wrote, by stream (``'stdout'``, ``'stderr'``: only those
            it wrote to), once it has finished: see :attr:`stdout`.
    """

    def __init__(self, task_id: str = '', executor: Executor | None = None) -> None:
        super().__init__()
        self.task_id = task_id
        self.timings: dict[str, float] = {}
        self.output: dict[str, str] = {}
        self._executor = executor

    @property
    def stdout(self) -> str:
        """What the task wrote to its standard output (``''``: nothing, or it has not
        finished): at most the endpoint's ``max_output_bytes`` (64 KiB by default), a
        longer output cut in its middle (``[... N bytes cut ...]``). Failed tasks have
        theirs too."""
        return self.output.get('stdout', '')

    @property
    def stderr(self) -> str:
        """What the task wrote to its standard error, like :attr:`stdout`."""
        return self.output.get('stderr', '')

    def cancel(self) -> bool:
        """Cancel the task: removed from its queue if it has not started, stopped on its
        worker if it runs (the endpoint replaces the worker). False if it has finished
        (its result, or its error, is this future's)."""
        if self.done():
            return self.cancelled()
        executor = self._executor
        if executor is not None and self.task_id and not executor._cancel_remote([self.task_id]):
            return False
        return cancel_local(self)


def cancel_local(future: concurrent.futures.Future[Any]) -> bool:
    """Cancel a future here only, and notify its waiters (``concurrent.futures.wait``
    counts a cancelled future done only once notified)."""
    if not concurrent.futures.Future.cancel(future):
        return False
    with contextlib.suppress(RuntimeError):  # notified already (cancelled from both sides)
        future.set_running_or_notify_cancel()
    return True


#: The Globus Compute SDK's name of :class:`TaskFuture`.
ComputeFuture = TaskFuture
