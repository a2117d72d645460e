"""The engine: submit tasks, pass their futures on, wait for them, record them.

::

    from concurrent.futures import ThreadPoolExecutor

    from tether.bench.engine import Engine

    with Engine(ThreadPoolExecutor(2)) as engine:
        a = engine.submit(sum, [1, 2])
        b = engine.submit(pow, a, 2)        # runs after a, with a's value
        assert b.result() == 9
"""

from __future__ import annotations

from tether.bench.engine._engine import Engine, EngineStats
from tether.bench.engine._future import TaskFuture, as_completed, wait
from tether.bench.engine._task import ExecutionInfo, TaskResult, TaskWrapper
from tether.bench.engine.config import EngineConfig
from tether.bench.engine.task import Task, TaskInfo, task
from tether.bench.engine.transform import TaskTransformer

__all__ = [
    'Engine',
    'EngineConfig',
    'EngineStats',
    'ExecutionInfo',
    'Task',
    'TaskFuture',
    'TaskInfo',
    'TaskResult',
    'TaskTransformer',
    'TaskWrapper',
    'as_completed',
    'task',
    'wait',
]
