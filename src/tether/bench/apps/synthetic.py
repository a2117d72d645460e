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
from tether.bench.registry import register

if TYPE_CHECKING:
    from tether.bench.engine import Engine, TaskFuture

__all__ = ['SyntheticApp', 'SyntheticAppConfig', 'WorkflowStructure', 'noop_task']

logger = logging.getLogger(__name__)


class WorkflowStructure(enum.Enum):
    """The shapes of the synthetic workflow."""

    BAG = 'bag'
    DIAMOND = 'diamond'
    REDUCE = 'reduce'
    SEQUENTIAL = 'sequential'


def noop_task(*data: Any, output_size: int = 0, sleep: float = 0.0) -> bytes:
    """Sleep ``sleep`` seconds; return ``output_size`` random bytes (inputs are ignored)."""
    del data
    if sleep > 0:
        time.sleep(sleep)
    return os.urandom(output_size) if output_size else b''


class SyntheticApp:
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

    def close(self) -> None:
        """Nothing to release."""

    def _submit(self, engine: Engine, *inputs: Any) -> TaskFuture[bytes]:
        return engine.submit(
            noop_task,
            *inputs,
            output_size=self.task_data_bytes,
            sleep=self.task_sleep,
        )

    def _data(self) -> bytes:
        return os.urandom(self.task_data_bytes)

    def run(self, engine: Engine, run_dir: pathlib.Path) -> None:
        """Run the workflow."""
        for _ in range(self.warmup_tasks):
            engine.submit(noop_task).result()
        start = time.perf_counter()
        shape = self.structure
        if shape is WorkflowStructure.SEQUENTIAL:
            future = self._submit(engine, self._data())
            for _ in range(self.task_count - 1):
                future = self._submit(engine, future)
            future.result()
        elif shape is WorkflowStructure.REDUCE:
            futures = [self._submit(engine, self._data()) for _ in range(self.task_count)]
            self._submit(engine, *futures).result()
        elif shape is WorkflowStructure.DIAMOND:
            first = self._submit(engine, self._data())
            middle = [self._submit(engine, first) for _ in range(self.task_count)]
            self._submit(engine, *middle).result()
        else:
            self._bag(engine)
        elapsed = time.perf_counter() - start
        logger.info(
            'synthetic %s: %d tasks in %.3f s (%.1f tasks/s)',
            shape.value,
            self.task_count,
            elapsed,
            self.task_count / elapsed if elapsed else float('inf'),
        )

    def _bag(self, engine: Engine) -> None:
        from tether.bench.engine import wait

        submitted = 0
        running: set[Any] = set()
        while submitted < self.task_count or running:
            while submitted < self.task_count and len(running) < self.bag_max_running:
                running.add(self._submit(engine, self._data()))
                submitted += 1
            done, running = wait(running, return_when='FIRST_COMPLETED')
            for f in done:
                f.result()


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
        return SyntheticApp(
            self.structure,
            self.task_count,
            task_data_bytes=self.task_data_bytes,
            task_sleep=self.task_sleep,
            bag_max_running=self.bag_max_running,
            warmup_tasks=self.warmup_tasks,
        )
