"""TaPS's task API: :func:`task`, :class:`Task`, :class:`TaskInfo` (and :class:`TaskResult`).

A :class:`Task` wraps a function. Called with the function's arguments it calls the
function; called with ``_transformer=`` as well (what a worker does) it resolves
transformed arguments, runs, transforms the value and returns a :class:`TaskResult`
with the execution's timings. :meth:`Engine.submit <tether.bench.engine.Engine.submit>`
takes a :class:`Task` or a plain function alike.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import uuid
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar, overload

from tether.bench.engine._task import ExecutionInfo, TaskResult, TaskWrapper
from tether.bench.transformer import TaskDataTransformer

__all__ = ['ExecutionInfo', 'Task', 'TaskInfo', 'TaskResult', 'task']

P = ParamSpec('P')
R = TypeVar('R')


@dataclasses.dataclass
class TaskInfo:
    """What the client knows of a task: its id, name, parents and times."""

    task_id: str
    name: str
    parent_task_ids: list[str]
    submit_time: float
    received_time: float | None = None
    success: bool | None = None
    exception: dict[str, Any] | None = None
    execution: ExecutionInfo | None = None


class Task(Generic[P, R]):
    """A function made a task (see :func:`task`).

    Args:
        function: The function.
        name: The task's name in records (default: the function's ``__name__``).
    """

    def __init__(self, function: Callable[P, R], *, name: str | None = None) -> None:
        self.function = function
        self.name = name or getattr(function, '__name__', type(function).__name__)
        functools.update_wrapper(self, function)

    def __repr__(self) -> str:
        return f'Task({self.name!r})'

    def __reduce__(self) -> str | tuple[Any, ...]:
        # A module-level task made with ``@task()`` or ``@task`` replaced its function
        # there: it pickles by reference to itself (importable by its name).
        module = sys.modules.get(getattr(self.function, '__module__', ''))
        qualname = getattr(self.function, '__qualname__', '')
        if module is not None and '<' not in qualname:
            target: Any = module
            for part in qualname.split('.'):
                target = getattr(target, part, None)
            if target is self:
                return qualname
        return (Task, (self.function,), {'name': self.name})

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.name = state['name']

    @overload
    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R: ...

    @overload
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        transformer = kwargs.pop('_transformer', None)
        if transformer is None:
            return self.function(*args, **kwargs)
        if not isinstance(transformer, TaskDataTransformer):
            raise TypeError(f'_transformer must be a TaskTransformer, not {transformer!r}')
        return TaskWrapper(self.function, uuid.uuid4().hex, transformer)(*args, **kwargs)


@overload
def task(function: Callable[P, R], /, *, name: str | None = None) -> Task[P, R]: ...


@overload
def task(
    function: None = None, /, *, name: str | None = None
) -> Callable[[Callable[P, R]], Task[P, R]]: ...


def task(
    function: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
) -> Task[P, R] | Callable[[Callable[P, R]], Task[P, R]]:
    """Make ``function`` a :class:`Task`; as a decorator, ``@task`` or ``@task()``.

    A task pickles by reference: a module-level ``@task()`` (or ``@task``) function as
    the task its module holds, ``my_task = task(fn)`` as its function.
    """
    if function is not None:
        return Task(function, name=name)

    def decorator(fn: Callable[P, R]) -> Task[P, R]:
        return Task(fn, name=name)

    return decorator
