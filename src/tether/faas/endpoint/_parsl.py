"""The Parsl engine: tasks run on a Parsl HighThroughputExecutor (HTEX).

HTEX brings Parsl's providers (Slurm, PBS, cloud ...), its block-based elasticity and its
retries; a task is handed off when Parsl accepts it. Each HTEX worker keeps the functions
it has loaded (warm) for later tasks. A task that Parsl reports lost with its worker, after
Parsl's ``retries`` (``max_retries``), fails with ``WorkerLostError``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import sys
from typing import Any

from tether.faas._config import ComputeEndpointConfig
from tether.faas.endpoint._worker import run_parsl_task
from tether.faas.endpoint.engine import (
    EngineBase,
    OnHandoff,
    OnResult,
    Task,
    cancelled_error,
    result_header,
)

__all__ = ['ParslEngine']

logger = logging.getLogger(__name__)


class ParslEngine(EngineBase):
    """Tasks through ``parsl.concurrent.ParslPoolExecutor`` over HTEX on this host.

    Args:
        config: The endpoint's configuration (``min_workers``/``max_workers`` become the
            HTEX worker count, ``idle_timeout_s`` its idle time, ``max_retries`` Parsl's
            retries).
        parsl_config: A ``parsl.config.Config`` to use instead (any provider).
    """

    def __init__(
        self,
        config: ComputeEndpointConfig,
        on_handoff: OnHandoff,
        on_result: OnResult,
        env: dict[str, str] | None = None,
        parsl_config: Any = None,
    ) -> None:
        super().__init__(config, on_handoff, on_result, env)
        self._parsl_config = parsl_config
        self._pool: Any = None
        self._pending = 0
        self._run_dir = ''
        self._futures: dict[str, Any] = {}
        self._cancelled: set[str] = set()

    def _default_config(self) -> Any:
        from tether.plugins.parsl import local_config

        config = local_config(
            label='tether-faas',
            workers=self.config.max_workers,
            min_blocks=0 if self.config.min_workers == 0 else 1,
            strategy=None,
            retries=self.config.max_retries,
            max_idletime=self.config.idle_timeout_s,
            initialize_logging=True,
            run_dir_prefix='tether-faas-parsl-',
        )
        self._run_dir = config.run_dir
        return config

    def start(self) -> None:
        import json

        from parsl.concurrent import ParslPoolExecutor

        os.environ.update(self.env)
        os.environ['TETHER_FAAS_SYS_PATH'] = json.dumps(sys.path)
        self._pool = ParslPoolExecutor(self._parsl_config or self._default_config())

    def submit(self, tasks: list[Task]) -> None:
        for task in tasks:
            message = (
                task.task_id,
                task.function_id,
                task.function_serializer,
                task.function_body,
                task.data_serializer,
                task.payload,
                task.result_store,
                task.result_threshold,
            )
            future = self._pool.submit(run_parsl_task, message, task.timeout)
            self._futures[task.task_id] = future
            self._pending += 1
            future.add_done_callback(lambda f, t=task: self._done(t, f))
        self.on_handoff([t.task_id for t in tasks])

    def cancel(self, task_ids: list[str]) -> None:
        """A task Parsl has not started is cancelled; one running on an HTEX worker runs
        to its end (Parsl cannot stop it), and its result is dropped."""
        for task_id in task_ids:
            if task_id in self._futures:
                self._cancelled.add(task_id)
                # Parsl's AppFuture refuses cancel(): the task runs to its end (or its
                # time limit), and _done reports it cancelled, dropping its result.
                with contextlib.suppress(NotImplementedError):
                    self._futures[task_id].cancel()

    def _done(self, task: Task, future: concurrent.futures.Future[Any]) -> None:
        self._pending -= 1
        self._futures.pop(task.task_id, None)
        if task.task_id in self._cancelled:
            self._cancelled.discard(task.task_id)
            self.on_result(
                result_header(
                    task.task_id, 'cancelled', task.data_serializer, cancelled_error(), 0.0, 0.0
                ),
                b'',
            )
            return
        error = future.exception()
        if error is None:
            task_id, status, ser, data, err, start, end = future.result()
            self.on_result(result_header(task_id, status, ser, err, start, end), data)
            return
        kind = type(error).__name__
        lost = 'WorkerLost' in kind or 'ManagerLost' in kind
        message = f'{kind}: {error} (after {self.config.max_retries} Parsl retries)'
        header = result_header(
            task.task_id,
            'failed',
            task.data_serializer,
            {'type': 'WorkerLostError' if lost else kind, 'message': message, 'traceback': ''},
            0.0,
            0.0,
        )
        self.on_result(header, b'')

    def stats(self) -> dict[str, Any]:
        return {
            'workers': self.config.max_workers,
            'idle': None,
            'pending': self._pending,
            'warm': {},
        }

    def stop(self) -> None:
        from tether.plugins.parsl import closing_run_log

        with closing_run_log(self._run_dir):
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None
        if self._run_dir:
            import shutil

            shutil.rmtree(self._run_dir, ignore_errors=True)
