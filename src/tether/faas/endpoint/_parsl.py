"""The Parsl engine: tasks run on a Parsl HighThroughputExecutor (HTEX).

HTEX brings Parsl's providers (Slurm, PBS Pro, LSF, HTCondor, Kubernetes, clouds: the
endpoint's ``[provider]`` table, :mod:`tether.faas.endpoint.providers`), its block-based
elasticity and its retries; a task is handed off when Parsl accepts it. Each HTEX worker
keeps the functions it has loaded (warm) for later tasks.

A worker lost with its block (``scancel``, a walltime, a node failure: Parsl's
``ManagerLost``/``WorkerLost``) is the only failure Parsl retries, up to ``max_retries``
times, each loss listed in the result's ``retries``; past them the task fails with
``WorkerLostError``. Every result's header says where the task ran last (``block``: the
Parsl block, the host and, inside a batch job, the scheduler and its job id, e.g.
``SLURM_JOB_ID``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import logging
import os
import shlex
import socket
import sys
import threading
import time
from typing import Any

from tether.faas.endpoint._worker import TaskMessage, run_parsl_task
from tether.faas.endpoint.engine import (
    EngineBase,
    Task,
    cancelled_error,
    ended_header,
    result_header,
)

__all__ = ['ParslEngine', 'block_info', 'run_in_block']

logger = logging.getLogger(__name__)

_LABEL = 'tether-faas'

# Each batch scheduler's environment variable of the job id, as its jobs see it.
_JOB_VARIABLES = (
    ('slurm', 'SLURM_JOB_ID'),
    ('pbs', 'PBS_JOBID'),
    ('lsf', 'LSB_JOBID'),
    ('condor', 'CONDOR_JOB_ID'),
)

# Parsl's names of the failures that mean "the worker went away", not "the task failed".
_LOST = ('ManagerLost', 'WorkerLost')


def block_info() -> dict[str, str]:
    """Where this worker runs: ``host``, Parsl's ``block_id`` and, inside a batch job,
    ``scheduler`` and ``job_id`` (``SLURM_JOB_ID``, ``PBS_JOBID``, ``LSB_JOBID``)."""
    info = {'host': socket.gethostname()}
    block = os.environ.get('PARSL_WORKER_BLOCK_ID')
    if block is not None:
        info['block_id'] = block
    for scheduler, variable in _JOB_VARIABLES:
        job = os.environ.get(variable)
        if job:
            info['scheduler'], info['job_id'] = scheduler, job
            break
    return info


def run_in_block(
    message: TaskMessage, timeout: float | None = None
) -> tuple[tuple[Any, ...], dict[str, str]]:
    """The Parsl engine's app: :func:`run_parsl_task`, and where it ran
    (:func:`block_info`)."""
    return run_parsl_task(message, timeout), block_info()


def _is_lost(error: BaseException) -> bool:
    return any(name in type(error).__name__ for name in _LOST)


@dataclasses.dataclass(eq=False, repr=False)
class ParslEngine(EngineBase):
    """Tasks through ``parsl.concurrent.ParslPoolExecutor`` over HTEX.

    Args:
        config: The endpoint's configuration: its ``provider`` (unset: one block of
            ``max_workers`` workers on this host), ``max_workers`` (workers per node),
            ``idle_timeout_s`` (an idle block is cancelled after it), ``max_retries``
            (Parsl's retries of a task whose worker was lost).
        parsl_config: A ``parsl.config.Config`` to use instead.
    """

    parsl_config: Any = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self._pool: Any = None
        self._dfk: Any = None
        self._pending = 0
        self._run_dir = ''
        self._futures: dict[str, Any] = {}
        self._cancelled: set[str] = set()
        self._lock = threading.Lock()
        self._losses: dict[str, list[dict[str, Any]]] = {}

    def _retry_cost(self, error: Exception, record: Any) -> float:
        """Parsl's ``retry_handler``: a lost worker costs one retry (and is listed in the
        task's ``retries``); any other failure is not retried."""
        if not _is_lost(error):
            return float(self.config.max_retries + 1)
        args = record.get('args') or ()
        task_id = args[0][0] if args and args[0] else None
        if isinstance(task_id, str):
            with self._lock:
                self._losses.setdefault(task_id, []).append(
                    {
                        'reason': f'{type(error).__name__}: {error}',
                        'exit_code': None,
                        'at': time.time(),
                    }
                )
        return 1.0

    def _worker_init(self, extra: str) -> str:
        """The shell lines of a block before its workers start: the endpoint's worker
        environment (batch systems other than Slurm do not pass the submitter's), then
        the site's ``worker_init``."""
        env = {**self.env, 'TETHER_FAAS_SYS_PATH': json.dumps(sys.path)}
        exports = '; '.join(f'export {k}={shlex.quote(v)}' for k, v in sorted(env.items()))
        return f'{exports}; {extra}' if extra else exports

    def _default_config(self) -> Any:
        from tether.plugins.parsl import (
            htex_config,
            local_config,
            make_launcher,
            make_provider,
            worker_init,
        )

        spec = self.config.provider
        if spec is None:
            config = local_config(
                label=_LABEL,
                workers=self.config.max_workers,
                min_blocks=0 if self.config.min_workers == 0 else 1,
                strategy=None,
                retries=self.config.max_retries,
                retry_handler=self._retry_cost,
                max_idletime=self.config.idle_timeout_s,
                initialize_logging=True,
                run_dir_prefix='tether-faas-parsl-',
            )
        else:
            options = spec.provider_options()
            if spec.takes_worker_init:
                options['worker_init'] = worker_init(self._worker_init(spec.worker_init))
            chosen = spec.launcher_config()
            launcher = None
            if chosen is not None:
                launcher = make_launcher(chosen.type, **chosen.parsl_options())
            provider = make_provider(
                spec.type,
                options,
                launcher=launcher,
                status_polling_interval=spec.status_polling_interval,
            )
            config = htex_config(
                provider,
                run_dir=spec.run_dir or self._private_run_dir(),
                label=_LABEL,
                workers_per_node=self.config.max_workers,
                retries=self.config.max_retries,
                retry_handler=self._retry_cost,
                max_idletime=self.config.idle_timeout_s,
                initialize_logging=True,
                run_dir_prefix='tether-faas-parsl-',
                **spec.executor_options(),
            )
        if spec is None:
            self._run_dir = config.run_dir
        return config

    def _private_run_dir(self) -> str:
        """A new run folder in the user's home (a file system clusters share with their
        compute nodes, unlike this host's /tmp), removed when the engine stops."""
        import pathlib
        import tempfile

        root = pathlib.Path.home() / '.tether' / 'faas-runs'
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._run_dir = tempfile.mkdtemp(prefix=f'{self.config.name}-', dir=root)
        return self._run_dir

    def start(self) -> None:
        from parsl.concurrent import ParslPoolExecutor

        from tether.plugins.parsl import start_kernel

        os.environ.update(self.env)
        os.environ['TETHER_FAAS_SYS_PATH'] = json.dumps(sys.path)
        self._dfk = start_kernel(self.parsl_config or self._default_config())
        self._pool = ParslPoolExecutor(dfk=self._dfk)

    def submit_app(self, fn: Any, *args: Any) -> concurrent.futures.Future[Any]:
        """Run ``fn(*args)`` as a Parsl app in a block (the managers engine's managers)."""
        future: concurrent.futures.Future[Any] = self._pool.submit(fn, *args)
        return future

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
            future = self._pool.submit(run_in_block, message, task.timeout)
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
        with self._lock:
            retries = self._losses.pop(task.task_id, [])
        if task.task_id in self._cancelled:
            self._cancelled.discard(task.task_id)
            self.on_result(ended_header(task, 'cancelled', cancelled_error()), b'')
            return
        error = future.exception()
        payload = b''
        if error is None:
            (task_id, status, ser, payload, err, start, end, out), where = future.result()
            header = result_header(task_id, status, ser, err, start, end, out)
            header['block'] = where
        else:
            kind = type(error).__name__
            lost = _is_lost(error)
            if lost:
                message = (
                    f'{kind}: {error}: its worker was lost {len(retries)} times (the block '
                    f'ended: cancelled, past its walltime, or its node failed); max_retries '
                    f'= {self.config.max_retries}'
                )
            else:
                message = f'{kind}: {error}'
            header = result_header(
                task.task_id,
                'failed',
                task.data_serializer,
                {'type': 'WorkerLostError' if lost else kind, 'message': message, 'traceback': ''},
                0.0,
                0.0,
            )
        if retries:
            header['retries'] = retries
        self.on_result(header, payload)

    def stats(self) -> dict[str, Any]:
        return {
            'workers': self.config.max_workers,
            'idle': None,
            'pending': self._pending,
            'warm': {},
        }

    def blocks(self) -> dict[str, int]:
        """The endpoint's blocks by state (``running``, ``pending``, ``cancelled`` ...), as
        Parsl's last poll of the provider saw them (empty before the engine starts)."""
        if self._dfk is None:
            return {}
        executor = self._dfk.executors.get(_LABEL)
        if executor is None:
            return {}
        states: dict[str, int] = {}
        for status in dict(executor.status_facade).values():
            name = status.state.name.lower()
            states[name] = states.get(name, 0) + 1
        return states

    def stop(self) -> None:
        from tether.plugins.parsl import stop_kernel

        if self._dfk is not None:
            dfk, self._dfk, self._pool = self._dfk, None, None
            stop_kernel(dfk)
        if self._run_dir:
            import shutil

            shutil.rmtree(self._run_dir, ignore_errors=True)
