"""The synthetic application: no-op sleep tasks in one of four shapes.

* ``sequential``: a chain; each task takes the previous one's output.
* ``reduce``: ``task_count`` independent tasks, then one task taking all their outputs.
* ``bag``: ``task_count`` independent tasks, at most ``bag_max_running`` in flight (the
  client submits a new one as each finishes: the shape of the seed's figure 2.9).
* ``diamond``: one task, ``task_count`` tasks after it, one task after all of them.

Each task receives ``task_data_bytes`` random bytes (from the client or its parents),
sleeps ``task_sleep`` seconds and returns ``task_data_bytes`` random bytes.
"""

from __future__ import annotations

import enum
import logging
import os
import pathlib
import time
from typing import TYPE_CHECKING, Any

import pydantic

from tether.bench.apps import AppConfig
from tether.bench.apps._common import HoldsNothing
from tether.bench.registry import register

if TYPE_CHECKING:
    from tether.bench.engine import Engine, TaskFuture

__all__ = [
    'Data',
    'SyntheticApp',
    'SyntheticAppConfig',
    'WorkflowStructure',
    'generate_data',
    'noop_task',
    'run_bag_of_tasks',
    'run_diamond',
    'run_reduce',
    'run_sequential',
]

logger = logging.getLogger(__name__)


class WorkflowStructure(enum.Enum):
    """The shapes of the synthetic workflow."""

    BAG = 'bag'
    DIAMOND = 'diamond'
    REDUCE = 'reduce'
    SEQUENTIAL = 'sequential'


class Data(bytes):
    """A task's payload: bytes of a distinct type (so a transformer filter can pick it)."""


def generate_data(size: int) -> Data:
    """``size`` random bytes as :class:`Data`."""
    return Data(os.urandom(size) if size else b'')


def noop_task(*data: Any, output_size: int = 0, sleep: float = 0.0) -> Data:
    """Sleep ``sleep`` seconds; return ``output_size`` random bytes (inputs are ignored)."""
    del data
    if sleep > 0:
        time.sleep(sleep)
    return generate_data(output_size)


def _submit(engine: Engine, data_bytes: int, sleep: float, *inputs: Any) -> TaskFuture[Data]:
    return engine.submit(noop_task, *inputs, output_size=data_bytes, sleep=sleep)


def run_sequential(
    engine: Engine, task_count: int, task_data_bytes: int, task_sleep: float
) -> None:
    """A chain of ``task_count`` tasks, each taking the previous one's output."""
    future = _submit(engine, task_data_bytes, task_sleep, generate_data(task_data_bytes))
    for _ in range(task_count - 1):
        future = _submit(engine, task_data_bytes, task_sleep, future)
    future.result()


def run_reduce(engine: Engine, task_count: int, task_data_bytes: int, task_sleep: float) -> None:
    """``task_count`` independent tasks, then one task taking all their outputs."""
    futures = [
        _submit(engine, task_data_bytes, task_sleep, generate_data(task_data_bytes))
        for _ in range(task_count)
    ]
    _submit(engine, task_data_bytes, task_sleep, *futures).result()


def run_diamond(engine: Engine, task_count: int, task_data_bytes: int, task_sleep: float) -> None:
    """One task, ``task_count`` tasks after it, one task after all of them."""
    first = _submit(engine, task_data_bytes, task_sleep, generate_data(task_data_bytes))
    middle = [_submit(engine, task_data_bytes, task_sleep, first) for _ in range(task_count)]
    _submit(engine, task_data_bytes, task_sleep, *middle).result()


def run_bag_of_tasks(
    engine: Engine,
    task_count: int,
    task_data_bytes: int,
    task_sleep: float,
    max_running_tasks: int,
) -> None:
    """``task_count`` independent tasks, at most ``max_running_tasks`` in flight at once."""
    from tether.bench.engine import wait

    submitted = 0
    running: set[Any] = set()
    while submitted < task_count or running:
        while submitted < task_count and len(running) < max_running_tasks:
            data = generate_data(task_data_bytes)
            running.add(_submit(engine, task_data_bytes, task_sleep, data))
            submitted += 1
        done, running = wait(running, return_when='FIRST_COMPLETED')
        for f in done:
            f.result()


class SyntheticApp(HoldsNothing):
    """Runs no-op tasks in the chosen :class:`WorkflowStructure`."""

    def __init__(
        self,
        structure: WorkflowStructure | str,
        task_count: int,
        *,
        task_data_bytes: int = 0,
        task_sleep: float = 0.0,
        bag_max_running: int | None = None,
        warmup_tasks: int = 0,
    ) -> None:
        self.structure = WorkflowStructure(structure)
        self.task_count = task_count
        self.task_data_bytes = task_data_bytes
        self.task_sleep = task_sleep
        self.bag_max_running = bag_max_running or task_count
        self.warmup_tasks = warmup_tasks

    def run(self, engine: Engine, run_dir: pathlib.Path) -> None:
        """Run the workflow."""
        for _ in range(self.warmup_tasks):
            engine.submit(noop_task).result()
        start = time.perf_counter()
        shape = self.structure
        args = (engine, self.task_count, self.task_data_bytes, self.task_sleep)
        if shape is WorkflowStructure.SEQUENTIAL:
            run_sequential(*args)
        elif shape is WorkflowStructure.REDUCE:
            run_reduce(*args)
        elif shape is WorkflowStructure.DIAMOND:
            run_diamond(*args)
        else:
            run_bag_of_tasks(*args, self.bag_max_running)
        elapsed = time.perf_counter() - start
        logger.info(
            'synthetic %s: %d tasks in %.3f s (%.1f tasks/s)',
            shape.value,
            self.task_count,
            elapsed,
            self.task_count / elapsed if elapsed else float('inf'),
        )


@register('app')
class SyntheticAppConfig(AppConfig):
    """Synthetic workflows of no-op tasks (stress tests, scaling, data transfer)."""

    name: str = 'synthetic'
    structure: WorkflowStructure = pydantic.Field(
        default=WorkflowStructure.BAG,
        description='bag, diamond, reduce or sequential',
    )
    task_count: int = pydantic.Field(default=16, ge=1, description='number of tasks')
    task_data_bytes: int = pydantic.Field(
        default=0, ge=0, description='bytes into and out of a task'
    )
    task_sleep: float = pydantic.Field(default=0.0, ge=0, description='seconds each task sleeps')
    bag_max_running: int | None = pydantic.Field(
        default=None,
        ge=1,
        description='bag: tasks in flight at once (default: all)',
    )
    warmup_tasks: int = pydantic.Field(default=0, ge=0, description='no-op tasks run first')

    def get_app(self) -> SyntheticApp:
        """Build the app."""
        return SyntheticApp(**self._app_arguments())
