"""What runs on the worker: the task wrapper and the result it sends back."""

from __future__ import annotations

import dataclasses
import os
import socket
import time
import traceback
import types
from collections.abc import Callable
from typing import Any

from tether.bench.transformer._protocol import TaskDataTransformer

__all__ = ['ExecutionInfo', 'TaskResult', 'TaskWrapper', 'execution_info_of', 'unwrap']

_HOSTNAME = socket.gethostname()
_pid = os.getpid
_INFO_ATTR = '_tether_bench_info'
_TB_ATTR = '_tether_bench_traceback'
_TASK_ATTR = '_tether_bench_task_id'


@dataclasses.dataclass(slots=True, eq=False)
class ExecutionInfo:
    """How one task ran on its worker (times are UNIX timestamps, durations seconds)."""

    hostname: str
    pid: int
    execution_start_time: float
    execution_end_time: float = 0.0
    input_resolve_time: float = 0.0
    function_time: float = 0.0
    result_transform_time: float = 0.0

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt positionally when unpickled: a short pickle, the class and seven values.
        return (ExecutionInfo, tuple(getattr(self, s) for s in _INFO_ORDER))

    def as_dict(self) -> dict[str, Any]:
        """Return the fields as a dict (for the task record)."""
        return {s: getattr(self, s) for s in _INFO_ORDER}


_INFO_ORDER = tuple(field.name for field in dataclasses.fields(ExecutionInfo))


class TaskResult:
    """A task's (possibly transformed) return value and its :class:`ExecutionInfo`."""

    __slots__ = ('info', 'value')

    # ``TaskResult[int]`` in annotations, as TaPS's generic class allows.
    __class_getitem__: Any = classmethod(types.GenericAlias)

    def __init__(self, value: Any, info: ExecutionInfo) -> None:
        self.value = value
        self.info = info

    def __reduce__(self) -> tuple[Any, ...]:
        return (TaskResult, (self.value, self.info))

    def __repr__(self) -> str:
        return f'TaskResult({type(self.value).__name__})'


def unwrap(obj: Any, transformer: TaskDataTransformer | None) -> Any:
    """Replace parent results (:class:`TaskResult`) by their values and resolve identifiers.

    Looks inside lists, tuples and dicts (where futures passed as arguments may sit).
    """
    cls = type(obj)
    if cls is TaskResult:
        obj = obj.value
    elif cls is list or cls is tuple:
        items = [unwrap(o, transformer) for o in obj]
        return items if cls is list else tuple(items)
    elif cls is dict:
        return {k: unwrap(v, transformer) for k, v in obj.items()}
    if transformer is not None:
        return transformer.resolve(obj)
    return obj


def _needs_unwrap(args: tuple[Any, ...]) -> bool:
    for a in args:
        cls = type(a)
        if cls is TaskResult or cls is list or cls is tuple or cls is dict:
            return True
    return False


def _execution_info(
    started: float, start: float, resolved: float, done: float, end: float
) -> ExecutionInfo:
    """The record of a task's run on this worker (``start``..``end``: perf_counter marks)."""
    return ExecutionInfo(
        _HOSTNAME, _pid(), started, time.time(), resolved - start, done - resolved, end - done
    )


class TaskWrapper:
    """Runs a task on the worker: resolves its inputs, calls it, transforms its result.

    Returns a :class:`TaskResult`. On failure the exception is re-raised (so executors
    that retry can retry) carrying the execution info and the formatted traceback.
    """

    __slots__ = ('__name__', 'function', 'task_id', 'transformer')

    def __init__(
        self,
        function: Callable[..., Any],
        task_id: str,
        transformer: TaskDataTransformer | None,
    ) -> None:
        self.function = function
        self.task_id = task_id
        self.transformer = transformer
        self.__name__ = getattr(function, '__name__', type(function).__name__)

    def __reduce__(self) -> tuple[Any, ...]:
        return (TaskWrapper, (self.function, self.task_id, self.transformer))

    def __call__(self, *args: Any, **kwargs: Any) -> TaskResult:
        started = time.time()
        start = time.perf_counter()
        resolved = done = 0.0  # perf_counter values once each phase ends
        try:
            transformer = self.transformer
            if transformer is not None or (args and _needs_unwrap(args)):
                args = tuple(unwrap(a, transformer) for a in args)
            if kwargs and (transformer is not None or _needs_unwrap(tuple(kwargs.values()))):
                kwargs = {k: unwrap(v, transformer) for k, v in kwargs.items()}
            resolved = time.perf_counter()
            value = self.function(*args, **kwargs)
            done = time.perf_counter()
            if transformer is not None:
                value = transformer.transform(value)
            end = time.perf_counter()
        except BaseException as e:
            end = time.perf_counter()
            resolved = resolved or end
            done = done or end
            info = _execution_info(started, start, resolved, done, end)
            _attach(e, info, self.task_id)
            raise
        return TaskResult(value, _execution_info(started, start, resolved, done, end))


def _attach(error: BaseException, info: ExecutionInfo, task_id: str) -> None:
    try:
        setattr(error, _TASK_ATTR, task_id)
        setattr(error, _INFO_ATTR, info)
        setattr(error, _TB_ATTR, ''.join(traceback.format_exception(error)))
    except (AttributeError, TypeError):  # pragma: no cover - exceptions with __slots__
        pass


def execution_info_of(
    error: BaseException,
    task_id: str | None = None,
) -> tuple[ExecutionInfo | None, str | None]:
    """Return the execution info and worker traceback a failed task attached to ``error``.

    Looks through ``__cause__`` and a ``cause`` attribute (executors that wrap errors).
    With ``task_id``, the execution info is returned only if that task raised the error
    (not a parent whose error was passed on); the traceback is returned either way.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        info = getattr(current, _INFO_ATTR, None)
        if isinstance(info, ExecutionInfo):
            if task_id is not None and getattr(current, _TASK_ATTR, None) != task_id:
                info = None
            return info, getattr(current, _TB_ATTR, None)
        nxt = getattr(current, 'cause', None)
        current = nxt if isinstance(nxt, BaseException) else current.__cause__
    return None, None
