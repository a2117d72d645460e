"""TaskFuture: the future of one task submitted to an :class:`~tether.bench.engine.Engine`."""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from tether._missing import MISSING as _MISSING
from tether.bench.engine._task import TaskResult, execution_info_of
from tether.bench.engine.task import TaskInfo

if TYPE_CHECKING:
    from tether.bench.engine._engine import Engine

__all__ = ['TaskFuture', 'as_completed', 'wait']

T = TypeVar('T')

_ALL_COMPLETED = concurrent.futures.ALL_COMPLETED
_InvalidState = concurrent.futures.InvalidStateError


class TaskFuture(concurrent.futures.Future[T], Generic[T]):
    """The future of a task: a ``concurrent.futures.Future`` with the task's metadata.

    :meth:`result` returns the task's value (a transformed result is resolved here, on
    first call). Pass a task future as an argument of another task to make that task
    depend on it. Works with ``concurrent.futures.wait``/``as_completed`` and with
    :func:`wait`/:func:`as_completed` of this package, across engines and executors.

    Attributes:
        task_id: The task's unique id (as in its record).
        function_name: The name of the task's function.
        parent_task_ids: Ids of the tasks whose futures were passed as arguments.
    """

    def __init__(
        self,
        task_id: str,
        function_name: str,
        parent_task_ids: list[str],
        engine: Engine,
    ) -> None:
        super().__init__()
        self.task_id = task_id
        self.function_name = function_name
        self.parent_task_ids = parent_task_ids
        self._engine = engine
        # submit_time, input_transform_time, _low and _value start as the class's
        # defaults (fewer stores per task on the submit path).

    submit_time: float = 0.0
    input_transform_time: float = 0.0
    _low: Any = None
    _value: Any = _MISSING

    @property
    def info(self) -> TaskInfo:
        """The task's :class:`~tether.bench.engine.task.TaskInfo` (TaPS's view of it)."""
        return TaskInfo(
            task_id=self.task_id,
            name=self.function_name,
            parent_task_ids=list(self.parent_task_ids),
            submit_time=self.submit_time,
        )

    def __repr__(self) -> str:
        return f'<TaskFuture {self.task_id} {self.function_name} {self._state}>'

    @property
    def executor_future(self) -> Any:
        """The future the executor returned (``None`` until the task was handed over)."""
        return self._low

    def _bind(self, low: Any) -> None:
        self._low = low
        low.add_done_callback(self._on_done)

    def _on_done(self, low: Any) -> None:
        # The hot path of every task: one lock round trip on each future when it succeeds.
        received = time.time()
        error: BaseException | None
        try:
            raw = low.result()
            error = None
        except BaseException as e:  # CancelledError too: the executor's future was cancelled
            raw, error = None, e
        self._engine._finished(self, raw, error, received)
        if error is None:
            if type(raw) is TaskResult:
                with contextlib.suppress(_InvalidState):  # cancelled by the caller meanwhile
                    self.set_result(raw)  # type: ignore[arg-type]  # result() unwraps it
                return
            error = TypeError(f'task {self.task_id} returned {raw!r}, not a TaskResult')
        if isinstance(error, concurrent.futures.CancelledError):
            if super().cancel() and self._state == 'CANCELLED':
                self.set_running_or_notify_cancel()
            return
        with contextlib.suppress(_InvalidState):
            self.set_exception(error)

    def cancel(self) -> bool:
        """Cancel the task if it has not started."""
        low = self._low
        if low is not None and not low.cancel():
            return False
        # Cancelling the executor's future may have cancelled this one already (_on_done).
        if not super().cancel():
            return False
        if self._state == 'CANCELLED':
            self.set_running_or_notify_cancel()
        return True

    def __tether_dependency_value__(self) -> Any:
        # What a FutureDependencyExecutor substitutes for this future: the raw task
        # result, so that a transformed value travels to the next task untouched.
        return super().result()

    def result(self, timeout: float | None = None) -> T:
        """Return the task's value, waiting up to ``timeout`` seconds.

        Raises:
            TimeoutError: if the task is not done in time.
            CancelledError: if the task was cancelled.
            Exception: the task's own exception if it failed (dependent tasks raise
                :class:`~tether.exceptions.TaskDependencyError`, chained to it, on
                executors without native dataflow).
        """
        if self._value is not _MISSING:
            return self._value  # type: ignore[no-any-return]
        raw: Any = super().result(timeout)
        if self._engine.transformer is None:
            self._value = raw.value  # nothing to resolve: no lock needed
            return self._value  # type: ignore[no-any-return]
        with self._condition:
            lock = self.__dict__.setdefault('_value_lock', threading.Lock())
        with lock:
            if self._value is _MISSING:
                self._value = self._engine._resolve_result(raw)
        return self._value  # type: ignore[no-any-return]

    def exception_traceback(self) -> str | None:
        """The traceback formatted on the worker where the task failed (if it failed)."""
        if not self.done() or self.cancelled():
            return None
        error = self.exception()
        if error is None:
            return None
        return execution_info_of(error, self.task_id)[1]


def as_completed(
    futures: Iterable[concurrent.futures.Future[Any]],
    timeout: float | None = None,
) -> Iterator[concurrent.futures.Future[Any]]:
    """Yield the futures (of any engines and executors) as they complete."""
    return concurrent.futures.as_completed(futures, timeout=timeout)


def wait(
    futures: Iterable[concurrent.futures.Future[Any]],
    timeout: float | None = None,
    return_when: str = _ALL_COMPLETED,
) -> tuple[set[concurrent.futures.Future[Any]], set[concurrent.futures.Future[Any]]]:
    """Wait for futures of any engines and executors; return ``(done, not_done)``.

    ``return_when`` is ``'ALL_COMPLETED'``, ``'FIRST_COMPLETED'`` or ``'FIRST_EXCEPTION'``
    (the constants of :mod:`concurrent.futures`).
    """
    done, not_done = concurrent.futures.wait(futures, timeout=timeout, return_when=return_when)
    return set(done), set(not_done)
