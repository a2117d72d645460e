"""A task server on a local process pool."""

from __future__ import annotations

import concurrent.futures
import logging
import multiprocessing
import threading
from collections.abc import Callable, Iterable
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from tether.steer.models import Result
from tether.steer.task_server._worker import run_task
from tether.steer.task_server.base import BaseTaskServer

__all__ = ['LocalTaskServer']

logger = logging.getLogger(__name__)


class LocalTaskServer(BaseTaskServer):
    """Run tasks on ``num_workers`` worker processes of this machine.

    A worker that dies (killed, crashed) fails the tasks it and its siblings were
    running; they are retried up to their ``max_retries`` on a fresh pool, and otherwise
    come back as failures that say a worker died.

    Args:
        queues: The queues shared with the Thinker.
        methods: Functions (module-level, so workers can find them).
        num_workers: Worker processes.
        timeout: Idle seconds before stopping (``None``: wait for the kill signal).
    """

    def __init__(
        self,
        queues: Any,
        methods: Iterable[Any],
        num_workers: int = 1,
        timeout: float | None = None,
    ) -> None:
        super().__init__(queues, methods, timeout)
        self.num_workers = num_workers
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def _new_pool(self) -> concurrent.futures.ProcessPoolExecutor:
        return concurrent.futures.ProcessPoolExecutor(
            self.num_workers,
            mp_context=multiprocessing.get_context('fork'),
        )

    def _setup(self) -> None:
        self._pool = self._new_pool()

    def _cleanup(self) -> None:
        with self._pool_lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None

    def _submit(self, method: Any, result: Result, done: Callable[[Result], None]) -> None:
        fn = method[0] if isinstance(method, tuple) else method
        with self._pool_lock:
            pool = self._pool
            assert pool is not None
            try:
                future = pool.submit(run_task, fn, result)
            except BrokenProcessPool:
                logger.warning('the process pool is broken: starting a new one')
                pool.shutdown(wait=False, cancel_futures=True)
                self._pool = pool = self._new_pool()
                future = pool.submit(run_task, fn, result)

        def callback(f: concurrent.futures.Future[Result]) -> None:
            try:
                finished = f.result()
            except BrokenProcessPool as e:
                self._replace(pool)
                result.set_failure(
                    f'WorkerLost: the worker process running task {result.task_id} died '
                    f'(killed, crashed or out of memory): {e}',
                )
                finished = result
            except Exception as e:
                result.set_failure(e)
                finished = result
            done(finished)

        future.add_done_callback(callback)

    def _replace(self, broken: concurrent.futures.ProcessPoolExecutor) -> None:
        with self._pool_lock:
            if self._pool is broken:
                logger.warning('a worker died: starting a new process pool')
                broken.shutdown(wait=False, cancel_futures=True)
                self._pool = self._new_pool()
