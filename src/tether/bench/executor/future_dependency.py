"""FutureDependencyExecutor: futures as task arguments, for any executor.

Many executors (``ProcessPoolExecutor``, Ray through
:class:`~tether.plugins.ray.RayExecutor`, function services) cannot take the future of
one task as an argument of the next. :class:`FutureDependencyExecutor` wraps such an
executor: it finds futures among a task's arguments (also inside lists, tuples and
dicts), returns a future at once, and submits the task when all its input futures are
done, without blocking the caller (a single dispatcher thread submits ready tasks). If an
input future failed, the task never runs and its future fails with
:class:`~tether.exceptions.TaskDependencyError`.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from tether._futures import pass_outcome
from tether.bench.executor import Executor
from tether.exceptions import TaskDependencyError

__all__ = ['FutureDependencyExecutor', 'find_futures', 'substitute_futures']

logger = logging.getLogger(__name__)

_Future = concurrent.futures.Future


def find_futures(args: Any, kwargs: Any = None) -> list[_Future[Any]]:
    """Return the ``concurrent.futures.Future`` objects in ``args`` and ``kwargs``.

    Looks inside lists, tuples and dicts; each future is listed once.
    """
    found: list[_Future[Any]] = []
    seen: set[int] = set()

    def visit(obj: Any) -> None:
        cls = type(obj)
        if cls is list or cls is tuple:
            for o in obj:
                visit(o)
        elif cls is dict:
            for o in obj.values():
                visit(o)
        elif isinstance(obj, _Future) and id(obj) not in seen:
            seen.add(id(obj))
            found.append(obj)

    for a in args:
        visit(a)
    if kwargs:
        for v in kwargs.values():
            visit(v)
    return found


def _value_of(future: _Future[Any]) -> Any:
    hook = getattr(future, '__tether_dependency_value__', None)
    return hook() if hook is not None else future.result()


def substitute_futures(obj: Any, values: dict[int, Any]) -> Any:
    """Replace each future in ``obj`` (also in lists, tuples, dicts) by ``values[id(future)]``.

    Futures whose id is not in ``values`` stay as they are.
    """
    cls = type(obj)
    if cls is list:
        return [substitute_futures(o, values) for o in obj]
    if cls is tuple:
        return tuple(substitute_futures(o, values) for o in obj)
    if cls is dict:
        return {k: substitute_futures(v, values) for k, v in obj.items()}
    if isinstance(obj, _Future):
        return values.get(id(obj), obj)
    return obj


class _Deferred:
    __slots__ = ('args', 'fn', 'futures', 'kwargs', 'lock', 'outer', 'remaining')

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        futures: list[_Future[Any]],
    ) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.futures = futures
        self.remaining = len(futures)
        self.lock = threading.Lock()
        self.outer: _Future[Any] = concurrent.futures.Future()


def _chain(inner: Any, outer: _Future[Any]) -> None:
    # Some executors hold their own futures weakly (Ray's, so that a result has one
    # holder): the outer future keeps the inner one alive until it completes.
    outer._tether_inner = inner  # type: ignore[attr-defined]
    inner.add_done_callback(functools.partial(pass_outcome, target=outer))


class FutureDependencyExecutor(concurrent.futures.Executor):
    """Wraps an executor so that futures may be passed as task arguments.

    Args:
        executor: The executor that runs the tasks.
        shutdown_executor: Shut ``executor`` down in :meth:`shutdown`.
    """

    def __init__(
        self,
        executor: Executor,
        *,
        shutdown_executor: bool = True,
    ) -> None:
        self.executor = executor
        self.shutdown_executor = shutdown_executor
        self._ready: queue.SimpleQueue[_Deferred | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._waiting = 0
        self._idle = threading.Condition(self._lock)
        self._dispatcher: threading.Thread | None = None
        self._closed = False
        self._pending: set[_Deferred] = set()

    def __repr__(self) -> str:
        return f'FutureDependencyExecutor({self.executor!r})'

    @property
    def waiting(self) -> int:
        """How many tasks wait for their input futures."""
        return self._waiting

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> _Future[Any]:
        """Submit ``fn(*args, **kwargs)``, after every future among its arguments is done."""
        if self._closed:
            raise RuntimeError('cannot schedule new tasks after shutdown')
        futures = find_futures(args, kwargs)
        if not futures:
            future: _Future[Any] = self.executor.submit(fn, *args, **kwargs)
            return future
        task = _Deferred(fn, args, kwargs, futures)
        with self._lock:
            self._waiting += 1
            self._pending.add(task)
            if self._dispatcher is None:
                self._dispatcher = threading.Thread(
                    target=self._dispatch,
                    name='tether-bench-dependencies',
                    daemon=True,
                )
                self._dispatcher.start()
        callback = functools.partial(self._parent_done, task)
        for f in futures:
            f.add_done_callback(callback)
        return task.outer

    def _parent_done(self, task: _Deferred, _: object = None) -> None:
        with task.lock:
            task.remaining -= 1
            ready = task.remaining == 0
        if ready:
            self._ready.put(task)

    def _dispatch(self) -> None:
        while True:
            task = self._ready.get()
            if task is None:
                return
            try:
                self._launch(task)
            except BaseException as e:  # pragma: no cover - defensive
                logger.exception('cannot submit a task whose inputs are ready')
                if not task.outer.done():
                    task.outer.set_exception(e)
            finally:
                with self._lock:
                    self._waiting -= 1
                    self._pending.discard(task)
                    self._idle.notify_all()

    def _launch(self, task: _Deferred) -> None:
        outer = task.outer
        if outer.cancelled():
            return
        values: dict[int, Any] = {}
        for f in task.futures:
            if f.cancelled():
                error: BaseException = concurrent.futures.CancelledError()
            else:
                error = f.exception()  # type: ignore[assignment]
            if error is not None:
                parent = getattr(f, 'task_id', None)
                failure = TaskDependencyError(
                    f'an input of task {getattr(task.fn, "__name__", task.fn)!r} failed '
                    f'({"task " + parent if parent else "a future"}: '
                    f'{type(error).__name__}: {error})',
                    task_id=parent,
                )
                failure.__cause__ = error
                if outer.set_running_or_notify_cancel():
                    outer.set_exception(failure)
                return
            values[id(f)] = _value_of(f)
        args = tuple(substitute_futures(a, values) for a in task.args)
        kwargs = {k: substitute_futures(v, values) for k, v in task.kwargs.items()}
        if not outer.set_running_or_notify_cancel():
            return
        try:
            inner = self.executor.submit(task.fn, *args, **kwargs)
        except BaseException as e:
            outer.set_exception(e)
            return
        _chain(inner, outer)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop accepting tasks; then shut the wrapped executor down if we own it.

        With ``wait``, waits until every task still waiting for its inputs was submitted
        (or cancelled, with ``cancel_futures``).
        """
        self._closed = True
        if cancel_futures:
            with self._lock:
                pending = list(self._pending)
            for task in pending:
                task.outer.cancel()
        if wait:
            with self._lock:
                while self._waiting:
                    self._idle.wait()
        if self._dispatcher is not None:
            self._ready.put(None)
            if wait:
                self._dispatcher.join()
        if self.shutdown_executor:
            self.executor.shutdown(wait=wait, cancel_futures=cancel_futures)
