"""The Engine: the one interface through which benchmark applications run tasks."""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple, TypeVar

from tether._closing import ClosingContext
from tether.bench.engine._future import TaskFuture
from tether.bench.engine._task import TaskResult, TaskWrapper, execution_info_of
from tether.bench.executor import Executor
from tether.bench.executor.future_dependency import FutureDependencyExecutor, substitute_futures
from tether.bench.filter import Filter
from tether.bench.record import NullRecordLogger, RecordLogger
from tether.bench.transformer._protocol import TaskDataTransformer, Transformer

__all__ = ['Engine', 'EngineStats']

logger = logging.getLogger(__name__)

T = TypeVar('T')


class EngineStats(NamedTuple):
    """Task counts of an engine at one moment."""

    submitted: int
    waiting: int
    running: int
    completed: int
    failed: int


def _has_native_dataflow(executor: Any) -> bool:
    return bool(getattr(executor, 'native_dataflow', False))


class Engine(ClosingContext):
    """Runs an application's tasks on an executor, with data transformers and records.

    Args:
        executor: A :class:`~tether.bench.executor.Executor` (any
            ``concurrent.futures.Executor`` is one). Executors that cannot take futures
            as arguments are wrapped in a
            :class:`~tether.bench.executor.future_dependency.FutureDependencyExecutor` (executors
            that can, such as :class:`~tether.bench.executor.dask.DaskDistributedExecutor`,
            say so with a true ``native_dataflow`` attribute).
        filter_: Selects the arguments and results that ``transformer`` transforms
            (default: all of them).
        transformer: Transforms task data (a
            :class:`~tether.bench.transformer.Transformer` or a
            :class:`~tether.bench.transformer.TaskDataTransformer`); ``None`` passes data
            by value through the executor.
        record_logger: Receives one record per finished task (see
            :mod:`tether.bench.record`).
    """

    def __init__(
        self,
        executor: Executor,
        *,
        filter_: Filter | None = None,
        transformer: Transformer | TaskDataTransformer | None = None,
        record_logger: RecordLogger | None = None,
    ) -> None:
        self.executor = executor
        self._native = _has_native_dataflow(executor) or isinstance(
            executor,
            FutureDependencyExecutor,
        )
        # Executors without dataflow get a wrapper; native ones get one too, used only
        # for tasks that depend on futures of other engines.
        self._deps = (
            executor
            if isinstance(executor, FutureDependencyExecutor)
            else FutureDependencyExecutor(executor, shutdown_executor=False)
        )
        if transformer is None:
            if filter_ is not None:
                raise ValueError('a filter needs a transformer (filter_ without transformer)')
            self.transformer: TaskDataTransformer | None = None
        elif isinstance(transformer, TaskDataTransformer):
            if filter_ is not None:
                transformer = TaskDataTransformer(transformer.transformer, filter_)
            self.transformer = transformer
        else:
            self.transformer = TaskDataTransformer(transformer, filter_)
        self._track = (
            None
            if self.transformer is None
            else getattr(self.transformer.transformer, 'track', None)
        )
        self.record_logger: RecordLogger = record_logger or NullRecordLogger()
        self._recording = type(self.record_logger) is not NullRecordLogger
        self._prefix = uuid.uuid4().hex[:12]
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self._submitted = 0
        self._completed = 0
        self._failed = 0
        self._closed = False

    def __repr__(self) -> str:
        return f'Engine({self.executor!r})'

    # Submitting ---------------------------------------------------------------------------

    def _dependencies(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> tuple[list[TaskFuture[Any]], bool, set[int | str]]:
        """Find the futures among the arguments.

        Returns the task futures, whether every future is a task future of this engine,
        and the positions (indices and keywords) of the arguments that hold futures.
        """
        if not kwargs:
            for a in args:
                if type(a) in _SCANNED or isinstance(a, _Future):
                    break
            else:
                return _NO_DEPENDENCIES  # the common case: nothing to look into
        found: list[TaskFuture[Any]] = []
        own = True
        where: set[int | str] = set()

        def visit(obj: Any) -> bool:
            nonlocal own
            cls = type(obj)
            if cls is list or cls is tuple:
                return any([visit(o) for o in obj])  # noqa: C419 (visit every item)
            if cls is dict:
                return any([visit(o) for o in obj.values()])  # noqa: C419
            if isinstance(obj, TaskFuture):
                found.append(obj)
                if obj._engine is not self or obj._low is None:
                    own = False
                return True
            if isinstance(obj, concurrent.futures.Future):
                own = False
                return True
            return False

        for i, a in enumerate(args):
            cls = type(a)
            if (
                cls is list
                or cls is tuple
                or cls is dict
                or isinstance(a, concurrent.futures.Future)
            ) and visit(a):
                where.add(i)
        for k, v in kwargs.items():
            if visit(v):
                where.add(k)
        return found, own, where

    def submit(self, function: Callable[..., T], /, *args: Any, **kwargs: Any) -> TaskFuture[T]:
        """Schedule ``function(*args, **kwargs)`` and return its :class:`TaskFuture`.

        Task futures (of this or another engine) may appear among the arguments, also
        inside lists, tuples and dicts: the task then runs after them, with their values.
        Arguments that hold futures are not transformed (their values are results, which
        the task that made them transformed already).

        Raises:
            RuntimeError: if the engine was shut down.
        """
        if self._closed:
            raise RuntimeError('cannot submit tasks to an engine that was shut down')
        parents, own, where = self._dependencies(args, kwargs)
        task_id = f'{self._prefix}-{next(self._counter)}'
        name = getattr(function, '__name__', type(function).__name__)
        future: TaskFuture[T] = TaskFuture(
            task_id,
            name,
            [p.task_id for p in parents] if parents else [],
            self,
        )
        transformer = self.transformer
        if transformer is not None:
            start = time.perf_counter()
            args = tuple(a if i in where else transformer.transform(a) for i, a in enumerate(args))
            kwargs = {k: v if k in where else transformer.transform(v) for k, v in kwargs.items()}
            future.input_transform_time = time.perf_counter() - start
        executor: Executor = self.executor
        if where:
            if self._native and own:
                # The executor resolves the dependencies itself: hand it its own futures.
                low = {id(p): p._low for p in parents}
                args = tuple(
                    substitute_futures(a, low) if i in where else a for i, a in enumerate(args)
                )
                kwargs = {
                    k: substitute_futures(v, low) if k in where else v for k, v in kwargs.items()
                }
            else:
                executor = self._deps
        with self._lock:
            self._submitted += 1
        future.submit_time = time.time()
        try:
            low_future = executor.submit(
                TaskWrapper(function, task_id, transformer),
                *args,
                **kwargs,
            )
        except BaseException:
            with self._lock:
                self._submitted -= 1
            raise
        future._low = low_future
        low_future.add_done_callback(future._on_done)
        return future

    def map(
        self,
        function: Callable[..., T],
        *iterables: Iterable[Any],
        timeout: float | None = None,
        chunksize: int = 1,
    ) -> Iterator[T]:
        """Submit ``function`` once per item of ``zip(*iterables)``; yield the results.

        As ``concurrent.futures.Executor.map``: every task is submitted at once, the
        values come back in order, and iterating raises ``TimeoutError`` if a value is
        not ready ``timeout`` seconds after this call (or the task's exception).
        ``chunksize`` is accepted and ignored. To pass the futures on to later tasks,
        use :meth:`map_futures`.
        """
        futures = self.map_futures(function, *iterables)
        deadline = None if timeout is None else time.monotonic() + timeout

        def results() -> Iterator[T]:
            for future in futures:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                yield future.result(timeout=left)

        return results()

    def map_futures(
        self,
        function: Callable[..., T],
        *iterables: Iterable[Any],
    ) -> list[TaskFuture[T]]:
        """Submit ``function`` once per item of ``zip(*iterables)``; return the futures.

        The futures come in order and can be passed on to later tasks.
        """
        return [self.submit(function, *items) for items in zip(*iterables, strict=False)]

    # Completion ---------------------------------------------------------------------------

    def _finished(
        self,
        future: TaskFuture[Any],
        raw: Any,
        error: BaseException | None,
        received: float,
    ) -> None:
        """Write the record of a finished task (called from the executor's callback)."""
        with self._lock:
            if error is None:
                self._completed += 1
            else:
                self._failed += 1
        exception = None
        info = None
        if error is None and type(raw) is TaskResult:
            info = raw.info
            transformer = self.transformer
            if (
                self._track is not None
                and transformer is not None
                and transformer.transformer.is_identifier(raw.value)
            ):
                self._track(raw.value)
            if not self._recording:
                return
        elif not self._recording:
            return
        elif error is not None:
            info, tb = execution_info_of(error, future.task_id)
            if tb is None:  # an executor that sends the worker's traceback as text
                tb = getattr(error, 'remote_traceback', None) or None
            exception = {
                'type': type(error).__name__,
                'message': str(error),
                'traceback': tb,
            }
        record = {
            'task_id': future.task_id,
            'function_name': future.function_name,
            'parent_task_ids': future.parent_task_ids,
            'submit_time': future.submit_time,
            'received_time': received,
            'input_transform_time': future.input_transform_time,
            'success': error is None,
            'exception': exception,
            'execution': None if info is None else info.as_dict(),
        }
        try:
            self.record_logger.log(record)
        except Exception:
            logger.exception('cannot log the record of task %s', future.task_id)

    def _resolve_result(self, raw: TaskResult) -> Any:
        value = raw.value
        if self.transformer is not None:
            value = self.transformer.resolve(value)
        return value

    # State and shutdown -----------------------------------------------------------------

    def stats(self) -> EngineStats:
        """Return the task counts (waiting: for input tasks; running: handed over)."""
        with self._lock:
            submitted, completed, failed = self._submitted, self._completed, self._failed
        waiting = self._deps.waiting
        running = max(0, submitted - completed - failed - waiting)
        return EngineStats(submitted, waiting, running, completed, failed)

    @property
    def tasks_submitted(self) -> int:
        """How many tasks were submitted."""
        return self._submitted

    @property
    def tasks_executed(self) -> int:
        """How many tasks finished, successfully or not (TaPS's name)."""
        with self._lock:
            return self._completed + self._failed

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Shut down the executor, then close the transformer and the record logger."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._deps is not self.executor:
                self._deps.shutdown(wait=wait, cancel_futures=cancel_futures)
            self.executor.shutdown(wait=wait, cancel_futures=cancel_futures)
        finally:
            try:
                if self.transformer is not None:
                    self.transformer.close()
            finally:
                self.record_logger.close()
        logger.debug('engine %s shut down (pid %d)', self._prefix, os.getpid())

    def close(self) -> None:
        """:meth:`shutdown`, waiting for the running tasks (what leaving ``with`` does)."""
        self.shutdown()


_SCANNED = (list, tuple, dict)
_Future = concurrent.futures.Future
_NO_DEPENDENCIES: tuple[list[TaskFuture[Any]], bool, set[int | str]] = ([], True, set())
"""What :meth:`Engine._dependencies` returns for arguments without futures (never
mutated by its callers)."""
